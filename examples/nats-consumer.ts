/**
 * An idempotent NATS JetStream consumer with the Redis store: an order re-published after the stream's
 * duplicate window (simulated here with a second id header) is still processed once.
 * Run: npx tsx examples/nats-consumer.ts (needs NATS with JetStream and Redis on loopback; EXAMPLE_RUN
 * names the stream, its subjects and the key prefix, random by default). In your code, import from
 * `idempotency-kit/nats` and `idempotency-kit/redis`.
 * @module
 */
import { randomUUID } from 'node:crypto';
import { AckPolicy, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect, headers } from '@nats-io/transport-node';
import { createClient } from 'redis';
import { createIdempotency } from '../src/index.js';
import { idempotentConsumer } from '../src/nats/index.js';
import { redisStore } from '../src/redis/index.js';

const nc = await connect({ servers: process.env.NATS_URL ?? 'nats://127.0.0.1:4222' });
const jsm = await jetstreamManager(nc);
// This run's names. Not the pid: the records outlive the process (`retentionMs`), and a later run given
// the same pid would find order-1001 already shipped and ship nothing.
const run = process.env.EXAMPLE_RUN ?? randomUUID().slice(0, 8);
const stream = `EXAMPLE_ORDERS_${run}`;
await jsm.streams.add({
  name: stream,
  subjects: [`example.${run}.orders`, `example.${run}.dlq`],
});
await jsm.consumers.add(stream, {
  durable_name: 'shipping',
  ack_policy: AckPolicy.Explicit,
  filter_subject: `example.${run}.orders`,
  max_deliver: -1, // the idempotent consumer dead-letters after maxDeliveries itself
  ack_wait: 30_000_000_000,
});
const js = jetstream(nc);

const redis = createClient({ url: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379' });
await redis.connect();
const idempotency = createIdempotency({
  store: redisStore({ client: redis, prefix: `example:${run}:` }),
});

let shipped = 0;
let settled = 0;
const running = await idempotentConsumer(
  await js.consumers.get(stream, 'shipping'),
  async (message) => {
    shipped++;
    console.log(`shipping ${new TextDecoder().decode(message.data)}`);
  },
  {
    name: 'shipping',
    idempotency,
    publisher: js,
    deadLetterSubject: `example.${run}.dlq`,
    hooks: { onExecuted: () => void settled++, onDuplicate: () => void settled++ },
  },
);

for (let i = 0; i < 2; i++) {
  const h = headers();
  h.set('x-idempotency-key', 'order-1001'); // Nats-Msg-Id would be dropped by the stream within its window
  await js.publish(`example.${run}.orders`, new TextEncoder().encode('order-1001'), {
    headers: h,
  });
}
while (settled < 2) await new Promise((resolve) => setTimeout(resolve, 50));
console.log(`shipped ${shipped} time(s)`);

await running.close();
await jsm.streams.delete(stream);
await nc.close();
redis.destroy();
