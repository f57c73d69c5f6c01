/**
 * Hono + the memory store (single process): the middleware per route, the context through
 * `c.get('idempotency')`, `currentIdempotency()` deep in the call tree with `asyncContext: true`, and a
 * browser's view: `hono/cors` mounted first, so a replay carries its headers and exposes `Idempotent-Replayed`.
 *
 * Run: `npx tsx examples/hono-memory.ts`.
 * @module
 */
import { Hono } from 'hono';
import { cors } from 'hono/cors';
import { currentIdempotency, idempotency } from '../src/hono/index.js';
import { memoryStore } from '../src/index.js';

const idem = idempotency({ store: memoryStore(), asyncContext: true });

// A helper far from the handler: it can still read the key, to tag the event it publishes.
function publish(event: string): string {
  return currentIdempotency()?.downstreamKey(event) ?? 'no-key';
}

let executions = 0;
const app = new Hono();
// Before the idempotency middleware: its headers are then on replays and problems too.
app.use('/orders', cors({ origin: 'https://shop.example', exposeHeaders: ['X-Request-Id'] }));
app.post('/orders', idem.route({ key: 'required' }), async (c) => {
  executions++;
  const order = (await c.req.json()) as { sku: string };
  const messageId = publish('order.created');
  return c.json(
    { id: `ord_${executions}`, sku: order.sku, key: c.get('idempotency')?.key, messageId },
    201,
  );
});

for (const key of ['order-1', 'order-1', undefined]) {
  const response = await app.request('/orders', {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      origin: 'https://shop.example',
      ...(key ? { 'idempotency-key': key } : {}),
    },
    body: JSON.stringify({ sku: 'book' }),
  });
  console.log(
    response.status,
    response.headers.get('idempotent-replayed') ?? '-',
    // A script on https://shop.example reads only the headers named here (and the safelisted ones).
    response.headers.get('access-control-expose-headers'),
    await response.text(),
  );
}
console.log(`handler ran ${executions} time(s)`);
