/**
 * An idempotent RabbitMQ consumer with the Redis store: the same order published three times is shipped
 * once; the duplicates are acked without running the handler.
 * Run: npx tsx examples/amqp-consumer.ts (needs RabbitMQ and Redis on loopback; EXAMPLE_RUN names the
 * queue and the key prefix, random by default). In your code, import from `idempotency-kit/amqp` and
 * `idempotency-kit/redis`.
 * @module
 */
import { randomUUID } from 'node:crypto';
import { connect } from 'amqplib';
import { createClient } from 'redis';
import { idempotentConsumer } from '../src/amqp/index.js';
import { createIdempotency } from '../src/index.js';
import { redisStore } from '../src/redis/index.js';

const connection = await connect(process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672');
// A confirm channel: retry and dead-letter copies are confirmed before the original is acked.
const channel = await connection.createConfirmChannel();
// This run's names. Not the pid: the records outlive the process (`retentionMs`), and a later run given
// the same pid would find order-1001 already shipped and ship nothing.
const run = process.env.EXAMPLE_RUN ?? randomUUID().slice(0, 8);
const queue = `example.orders.${run}`;
await channel.assertQueue(queue, { durable: true });

const redis = createClient({ url: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379' });
await redis.connect();
const idempotency = createIdempotency({
  store: redisStore({ client: redis, prefix: `example:${run}:` }),
  leaseMs: '30s',
  retentionMs: '7d', // longer than any redelivery or manual replay from the DLQ
  // A handler still running after 10 minutes is treated as hung: its lease stops being extended, so the
  // key is not held for as long as this process lives.
  maxExecution: '10m',
});

let shipped = 0;
let settled = 0;
const consumer = await idempotentConsumer(
  channel,
  async (message, context) => {
    const order = JSON.parse(message.content.toString()) as { id: string };
    shipped++;
    console.log(`shipping ${order.id} (delivery ${context.deliveryCount}, token ${context.token})`);
  },
  {
    queue,
    name: 'shipping', // the scope of this consumer's keys
    idempotency,
    maxDeliveries: 5,
    prefetch: 20,
    // The retry queue as a quorum queue with at-least-once dead-lettering (RabbitMQ 3.10+): a retry copy
    // that `queue` cannot take when its delay ends (full, deleted, leaderless) is kept, not dropped.
    retryQueueType: 'quorum',
    hooks: {
      onExecuted: () => void settled++,
      onDuplicate: ({ key }) => {
        settled++;
        console.log(`duplicate of ${key} acked`);
      },
      // The queue deleted or the channel closed: `consumer.done` resolves; a service would open a new
      // channel and consume again, or exit and let its supervisor restart it.
      onConsumerError: ({ operation, error }) =>
        console.error(`consumer stopped (${operation})`, error),
    },
  },
);

// The publisher sets a stable message id: the key the consumer deduplicates on.
for (let i = 0; i < 3; i++) {
  channel.sendToQueue(queue, Buffer.from('{"id":"order-1001"}'), { messageId: 'order-1001' });
}
await channel.waitForConfirms();
while (settled < 3) await new Promise((resolve) => setTimeout(resolve, 50));
console.log(`shipped ${shipped} time(s)`);

await consumer.close(); // drains in-flight messages
for (const name of [queue, `${queue}.retry`, `${queue}.dlq`]) await channel.deleteQueue(name);
await connection.close();
redis.destroy();
