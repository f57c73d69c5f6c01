/**
 * The RabbitMQ and NATS consumer examples keep doing what their docs say, each run as a real process
 * against the local broker and Redis, with names of this run (`EXAMPLE_RUN`: queue or stream, key prefix).
 * The example deletes its queues or stream; whatever it left (a failed run) and its records go afterwards.
 */
import { randomUUID } from 'node:crypto';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect as natsConnect } from '@nats-io/transport-node';
import { connect as amqpConnect } from 'amqplib';
import { createClient } from 'redis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { env, requireService } from '../../helpers/env.js';
import { deleteKeys } from '../../helpers/redis-clients.js';
import { assertExitedCleanly, runExample } from '../../helpers/run-example.js';

const redis = createClient({ url: env.redisUrl });
redis.on('error', () => {});

beforeAll(async () => {
  await requireService('Redis', env.redisUrl);
  await redis.connect();
});
afterAll(() => {
  redis.destroy();
});

/** Run `file` with `EXAMPLE_RUN=run`; returns its output. */
async function run(file: string, runId: string): Promise<string> {
  const result = await runExample(file, {
    env: {
      REDIS_URL: env.redisUrl,
      AMQP_URL: env.amqpUrl,
      NATS_URL: env.natsUrl,
      EXAMPLE_RUN: runId,
    },
  });
  assertExitedCleanly(file, result);
  return result.stdout;
}

describe('amqp-consumer.ts', () => {
  const runId = `exs-${randomUUID().slice(0, 8)}`;
  const queue = `example.orders.${runId}`;

  beforeAll(() => requireService('RabbitMQ', env.amqpUrl));
  afterAll(async () => {
    const connection = await amqpConnect(env.amqpUrl);
    const channel = await connection.createChannel();
    for (const name of [queue, `${queue}.retry`, `${queue}.dlq`]) await channel.deleteQueue(name);
    await connection.close();
    await deleteKeys(redis, `example:${runId}:`);
  });

  it('ships the order published three times once and acks the two duplicates', async () => {
    const output = await run('amqp-consumer.ts', runId);
    expect(output.match(/^shipping order-1001 \(delivery 1, token \d+\)$/gm), output).toHaveLength(
      1,
    );
    expect(output.match(/^duplicate of order-1001 acked$/gm), output).toHaveLength(2);
    expect(output).toContain('shipped 1 time(s)\n');
    // Its records are under this run's prefix, not one a later run could share.
    expect(await deleteKeys(redis, `example:${runId}:`)).toBeGreaterThan(0);
  });
});

describe('nats-consumer.ts', () => {
  const runId = `exs-${randomUUID().slice(0, 8)}`;
  const stream = `EXAMPLE_ORDERS_${runId}`;

  beforeAll(() => requireService('NATS', env.natsUrl));
  afterAll(async () => {
    const nc = await natsConnect({ servers: env.natsUrl });
    const jsm = await jetstreamManager(nc);
    await jsm.streams.delete(stream).catch(() => false);
    await nc.close();
    await deleteKeys(redis, `example:${runId}:`);
  });

  it('processes the order re-published with a second id header once, and deletes its stream', async () => {
    const output = await run('nats-consumer.ts', runId);
    expect(output.match(/^shipping order-1001$/gm), output).toHaveLength(1);
    expect(output).toContain('shipped 1 time(s)\n');
    const nc = await natsConnect({ servers: env.natsUrl });
    try {
      const jsm = await jetstreamManager(nc);
      await expect(jsm.streams.info(stream)).rejects.toThrow(/stream not found/);
    } finally {
      await nc.close();
    }
    expect(await deleteKeys(redis, `example:${runId}:`)).toBeGreaterThan(0);
  });
});
