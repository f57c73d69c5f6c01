/**
 * Observability of a consumer: an idempotent RabbitMQ consumer on the shared Redis store counts its
 * messages in the same metrics as an HTTP layer would, under its own namespace.
 */
import { randomUUID } from 'node:crypto';
import { type ChannelModel, type ConfirmChannel, connect } from 'amqplib';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idempotentConsumer } from '../../../src/amqp/index.js';
import { createIdempotency } from '../../../src/index.js';
import { prometheusHooks } from '../../../src/prometheus/index.js';
import { redisStore } from '../../../src/redis/index.js';
import { env, requireService } from '../../helpers/env.js';
import { connectClient, deleteKeys, type TestRedisClient } from '../../helpers/redis-clients.js';

describe('metrics of a RabbitMQ consumer on Redis', () => {
  const prefix = `test:observability-amqp:${randomUUID()}:`;
  const queue = `test.observability.${randomUUID()}`;
  let connection: ChannelModel;
  let channel: ConfirmChannel;
  let redis: TestRedisClient;

  beforeAll(async () => {
    await requireService('rabbitmq', env.amqpUrl);
    await requireService('redis', env.redisUrl);
    connection = await connect(env.amqpUrl);
    channel = await connection.createConfirmChannel();
    await channel.assertQueue(queue, { durable: false });
    redis = await connectClient('node-redis', env.redisUrl);
  });

  afterAll(async () => {
    if (channel !== undefined) {
      for (const name of [queue, `${queue}.retry`, `${queue}.dlq`]) {
        await channel.deleteQueue(name).catch(() => undefined);
      }
    }
    await connection?.close();
    if (redis !== undefined) {
      await deleteKeys(redis.client, prefix);
      await redis.close();
    }
  });

  it('counts one execution and the duplicates as replays, under the consumer’s namespace', async () => {
    const registry = new Registry();
    const idempotency = createIdempotency({
      store: redisStore({ client: redis.client, prefix, checkEvictionPolicy: false }),
      namespace: 'shipping-worker',
      hooks: prometheusHooks({ registry }),
    });
    let settled = 0;
    let executions = 0;
    const consumer = await idempotentConsumer(
      channel,
      async () => {
        executions++;
      },
      {
        queue,
        name: 'shipping',
        idempotency,
        hooks: { onExecuted: () => void settled++, onDuplicate: () => void settled++ },
      },
    );
    // Published one at a time: each copy arrives after the previous one completed.
    for (let i = 0; i < 5; i++) {
      channel.sendToQueue(queue, Buffer.from('{}'), { messageId: 'order-1001' });
      await channel.waitForConfirms();
      while (settled <= i) await new Promise((resolve) => setTimeout(resolve, 10));
    }
    await consumer.close();

    const text = await registry.metrics();
    expect(executions).toBe(1);
    expect(text).toContain(
      'idempotency_runs_total{namespace="shipping-worker",outcome="executed"} 1',
    );
    expect(text).toContain(
      'idempotency_runs_total{namespace="shipping-worker",outcome="replayed"} 4',
    );
  });
});
