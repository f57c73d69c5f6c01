/**
 * `npm run demo`: the engine on a SQLite file, showing the four outcomes of `run()`:
 * executed, replayed, in_progress and mismatch.
 */
import { mkdirSync } from 'node:fs';
import { createIdempotency, type RunOutcome } from '../src/index.js';
import { sqliteStore } from '../src/sqlite/index.js';

mkdirSync('.data', { recursive: true });
const store = sqliteStore({ database: '.data/demo.db' });
// A fresh namespace per run, so every `npm run demo` shows the first execution again.
const idempotency = createIdempotency({ store, namespace: `demo-${Date.now()}`, leaseMs: '10s' });

let charges = 0;
async function chargeCard(order: { amount: number }, downstreamKey: string) {
  charges++;
  await new Promise((resolve) => setTimeout(resolve, 200));
  return { chargeId: `ch_${charges}`, amount: order.amount, providerKey: downstreamKey };
}

function show(label: string, outcome: RunOutcome<unknown>) {
  const detail =
    outcome.status === 'executed' || outcome.status === 'replayed'
      ? JSON.stringify(outcome.value)
      : outcome.status === 'in_progress'
        ? `retry after ${outcome.retryAfterMs} ms`
        : 'this key was used for a different request';
  console.log(`${label.padEnd(44)} → ${outcome.status.padEnd(11)} ${detail}`);
}

const order = { amount: 4200, currency: 'EUR' };
let requests = 0;
const pay = (key: string, body: { amount: number; currency: string }) => {
  requests++;
  return idempotency.run({ key, payload: body }, (ctx) =>
    chargeCard(body, ctx.downstreamKey('charge')),
  );
};

console.log(`idempotency-kit demo on SQLite (.data/demo.db)\n`);
show('POST order-1 (first time)', await pay('order-1', order));
show('POST order-1 again (client retry)', await pay('order-1', order));

const first = pay('order-2', order);
await new Promise((resolve) => setTimeout(resolve, 20));
show('POST order-2 while the first is running', await pay('order-2', order));
show('POST order-2 (the first call)', await first);

show('POST order-1 with a different amount', await pay('order-1', { ...order, amount: 9900 }));

console.log(`\nThe card was charged ${charges} times for 2 orders and ${requests} requests.`);
console.log(`Records in the store: ${JSON.stringify(await store.stats())}`);
await store.close?.();
