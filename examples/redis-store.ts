/**
 * The Redis store with node-redis: one idempotent "create order" call, run twice with the same key.
 * The second run replays the first outcome instead of executing again.
 *
 * Run: `npx tsx examples/redis-store.ts` (REDIS_URL, default redis://127.0.0.1:6379).
 * @module
 */
import { createClient } from 'redis';
import { createIdempotency } from '../src/index.js';
import { redisStore } from '../src/redis/index.js';

const client = createClient({ url: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379' });
// Without a listener, a connection error event would crash the process; calls still fail closed.
client.on('error', (error: Error) => console.error('redis:', error.message));
await client.connect();

const idempotency = createIdempotency({
  store: redisStore({ client, prefix: 'example:orders:', timeoutMs: 2000 }),
  namespace: 'orders',
  leaseMs: '30s',
  retentionMs: '24h',
});

let executions = 0;
const key = `order-${Date.now()}`;
for (let i = 0; i < 2; i++) {
  const outcome = await idempotency.run({ key, payload: { sku: 'book', qty: 1 } }, async (ctx) => {
    executions++;
    // Hand a derived key to any downstream provider, so a retry after a crash deduplicates there too.
    return { orderId: `ord_${ctx.token}`, paymentKey: ctx.downstreamKey('charge') };
  });
  switch (outcome.status) {
    case 'executed':
    case 'replayed':
      console.log(outcome.status, outcome.value);
      break;
    case 'in_progress':
      console.log(`in progress, retry after ${outcome.retryAfterMs} ms`);
      break;
    case 'mismatch':
      console.log('same key, different request');
      break;
  }
}
console.log(`executions: ${executions}`);
client.destroy();
