/**
 * Express + Redis: `POST /orders` requires an `Idempotency-Key`; the same request sent twice runs the
 * handler once and the second response is a replay (`Idempotent-Replayed: true`), even though a load
 * balancer's cookie changed in between: only the session cookie scopes the records (`scopeCookies`).
 *
 * Run: `npx tsx examples/express-redis.ts` (REDIS_URL, default redis://127.0.0.1:6379).
 * @module
 */
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { createClient } from 'redis';
import { idempotency, keepRawBody } from '../src/express/index.js';
import { redisStore } from '../src/redis/index.js';

const client = createClient({ url: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379' });
client.on('error', (error: Error) => console.error('redis:', error.message));
await client.connect();

const idem = idempotency({
  // A short timeout makes an outage a fast 503 instead of a hanging request.
  store: redisStore({ client, prefix: 'example:http:', timeoutMs: 500 }),
  namespace: 'orders-api',
  retentionMs: '24h',
  // A request still running after 2 minutes is treated as hung: its key can then be taken over by a retry
  // instead of answering 409 for as long as this process lives.
  maxExecution: '2m',
  // Records are scoped by the caller's session cookie alone; other cookies may change between retries.
  // Behind real authentication, pass `scope: (req) => req.user.id` instead.
  scopeCookies: ['sid'],
});

let executions = 0;
const app = express();
// Authentication and body parsing come first: their 401/400 responses are never stored. Keeping the raw
// JSON text lets the fingerprint tell apart ids beyond 2^53, which parsing rounds to one double.
app.use(express.json({ verify: keepRawBody }));
app.post('/orders', idem.route({ key: 'required' }), (req, res) => {
  executions++;
  const order = { id: `ord_${executions}`, ...req.body };
  // Hand the derived key to a payment provider so a retry after a crash deduplicates there too.
  const paymentKey = req.idempotency?.downstreamKey('charge');
  res.status(201).location(`/orders/${order.id}`).json({ order, paymentKey });
});

const server = app.listen(0, '127.0.0.1');
await new Promise((resolve) => server.once('listening', resolve));
const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/orders`;

const key = randomUUID();
for (let i = 0; i < 2; i++) {
  const response = await fetch(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'idempotency-key': `"${key}"`,
      cookie: `sid=session-1; lb=node-${i + 1}`,
    },
    // An int64 account id, as a Java or Go client writes it.
    body: '{"sku":"book","qty":1,"account":9223372036854775807}',
  });
  console.log(
    response.status,
    response.headers.get('idempotent-replayed') ?? '-',
    await response.text(),
  );
}
// The same key for another account: 422, though both ids parse to one double (the raw text tells them apart).
const otherAccount = await fetch(url, {
  method: 'POST',
  headers: {
    'content-type': 'application/json',
    'idempotency-key': `"${key}"`,
    cookie: 'sid=session-1',
  },
  body: '{"sku":"book","qty":1,"account":9223372036854775806}',
});
console.log(otherAccount.status, ((await otherAccount.json()) as { code: string }).code);
const missing = await fetch(url, {
  method: 'POST',
  headers: { 'content-type': 'application/json' },
  body: '{}',
});
console.log(missing.status, await missing.text());
console.log(`handler ran ${executions} time(s)`);

server.close();
await client.quit();
