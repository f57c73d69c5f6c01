/**
 * An idempotent Redis Streams consumer (consumer group) with the Redis store.
 * Run: npx tsx examples/redis-streams-consumer.ts (needs Redis on loopback; EXAMPLE_RUN names the stream
 * and the key prefix, random by default). In your code, import from `idempotency-kit/redis-streams` and
 * `idempotency-kit/redis`.
 * @module
 */
import { randomUUID } from 'node:crypto';
import { createClient } from 'redis';
import { createIdempotency } from '../src/index.js';
import { redisStore } from '../src/redis/index.js';
import { idempotentConsumer } from '../src/redis-streams/index.js';

const client = createClient({ url: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379' });
await client.connect();
// A second connection for the blocking XREADGROUP, so acks never queue behind it.
const blocking = client.duplicate();
await blocking.connect();

// This run's names. Not the pid: the records outlive the process (`retentionMs`), and a later run given
// the same pid would find order-1001 already shipped and ship nothing.
const run = process.env.EXAMPLE_RUN ?? randomUUID().slice(0, 8);
const stream = `example:orders:${run}`;
const idempotency = createIdempotency({
  store: redisStore({ client, prefix: `example:${run}:` }),
});

let shipped = 0;
let settled = 0;
const consumer = await idempotentConsumer(
  client,
  async (entry) => {
    shipped++;
    console.log(`shipping ${entry.fields.order} (entry ${entry.id})`);
  },
  {
    stream,
    group: 'shipping',
    name: 'shipping',
    idempotency,
    blockingClient: blocking,
    minIdle: '30s', // a crashed consumer's entries are reclaimed after this
    hooks: { onExecuted: () => void settled++, onDuplicate: () => void settled++ },
  },
);

// Two entries, one key: the field `x-idempotency-key` is what the consumer deduplicates on.
for (let i = 0; i < 2; i++) {
  await client.xAdd(stream, '*', { 'x-idempotency-key': 'order-1001', order: 'order-1001' });
}
while (settled < 2) await new Promise((resolve) => setTimeout(resolve, 50));
console.log(`shipped ${shipped} time(s)`);

await consumer.close();
await client.del([stream, `${stream}:dlq`]);
client.destroy();
blocking.destroy();
