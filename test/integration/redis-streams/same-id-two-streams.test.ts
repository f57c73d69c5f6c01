/**
 * Two streams give out the same entry ids (`<ms>-<seq>`): the default key of an entry without
 * `x-idempotency-key` names its stream, so a consumer name used on two streams (one engine, one
 * namespace) runs each stream's entry, against a real Redis. Before, the key was the id alone: the second
 * stream's entry was a duplicate of the first's, acknowledged without its handler running (lost).
 */
import { randomUUID } from 'node:crypto';
import { createClient } from 'redis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIdempotency, memoryStore } from '../../../src/index.js';
import { defaultStreamKey, idempotentConsumer } from '../../../src/redis-streams/index.js';
import { env, requireService } from '../../helpers/env.js';
import { waitUntil } from '../../helpers/wait-until.js';

type Client = ReturnType<typeof createClient>;
type ConsumerClient = Parameters<typeof idempotentConsumer>[0];

describe('Redis Streams consumer: one name on two streams', () => {
  const prefix = `ik-test:streams-same-id:${randomUUID().slice(0, 8)}`;
  const streams = [`${prefix}:orders`, `${prefix}:refunds`];
  let client: Client;

  beforeAll(async () => {
    await requireService('Redis', env.redisUrl);
    client = createClient({ url: env.redisUrl });
    await client.connect();
  });

  afterAll(async () => {
    await client?.sendCommand(['DEL', ...streams, ...streams.map((s) => `${s}:dlq`)]);
    client?.destroy();
  });

  it('runs the entry of each stream, though both have the same id', async () => {
    // Arrange: one entry with the same explicit id in each stream, no x-idempotency-key.
    for (const stream of streams) {
      await client.sendCommand(['XADD', stream, '1700000000000-0', 'amount', '100']);
    }
    const idempotency = createIdempotency({ store: memoryStore() });
    const ran: string[] = [];
    // Act: one consumer name, one engine, on both streams.
    const consumers = await Promise.all(
      streams.map((stream) =>
        idempotentConsumer(
          client as unknown as ConsumerClient,
          () => {
            ran.push(stream);
          },
          { stream, group: 'billing', name: 'billing', idempotency, pollInterval: '20ms' },
        ),
      ),
    );
    try {
      await waitUntil(
        'both entries to run and be acknowledged',
        async () => {
          const pending = await Promise.all(
            streams.map((stream) => client.sendCommand(['XPENDING', stream, 'billing'])),
          );
          return (
            ran.length === 2 &&
            pending.every((reply) => Number((reply as unknown as unknown[])[0]) === 0)
          );
        },
        10_000,
      );
    } finally {
      await Promise.all(consumers.map((consumer) => consumer.close()));
    }
    // Assert
    expect(ran.sort()).toEqual([...streams].sort());
  });

  it('keys an entry without x-idempotency-key by its stream and id, and one with it by the field', () => {
    const entry = { stream: 'orders', id: '1700000000000-0', fields: {}, buffers: {} };
    expect(defaultStreamKey(entry)).toBe('orders:1700000000000-0');
    expect(defaultStreamKey({ ...entry, fields: { 'x-idempotency-key': 'order-42' } })).toBe(
      'order-42',
    );
  });
});
