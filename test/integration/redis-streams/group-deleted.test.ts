/**
 * The consumer group (or the whole stream) deleted while the Redis Streams consumer runs: every read then
 * fails with `NOGROUP`. The consumer re-creates the group (after the last entry it read), reports it
 * through `hooks.onConsumerError`, and goes on processing new entries, instead of retrying in silence.
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { createClient } from 'redis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIdempotency, memoryStore } from '../../../src/index.js';
import {
  idempotentConsumer,
  type RedisStreamsConsumerErrorEvent,
} from '../../../src/redis-streams/index.js';
import { env, requireService } from '../../helpers/env.js';
import { waitUntil as pollUntil } from '../../helpers/wait-until.js';

type Client = ReturnType<typeof createClient>;

// This file's timeout, polling every 10 ms.
const waitUntil = (what: string, predicate: () => boolean, timeoutMs = 5000) =>
  pollUntil(what, predicate, timeoutMs, 10);

describe('Redis Streams consumer: the group deleted while running', () => {
  const run = randomUUID().slice(0, 8);
  const streams: string[] = [];
  let admin: Client;
  const clients: Array<{ destroy(): void }> = [];

  beforeAll(async () => {
    await requireService('Redis', env.redisUrl);
    admin = createClient({ url: env.redisUrl });
    await admin.connect();
  });

  afterAll(async () => {
    for (const client of clients) client.destroy();
    if (streams.length > 0) await admin?.sendCommand(['DEL', ...streams]);
    admin?.destroy();
  });

  const deletions = {
    'XGROUP DESTROY': (stream: string) => ['XGROUP', 'DESTROY', stream, 'workers'],
    'DEL of the stream': (stream: string) => ['DEL', stream],
  };

  for (const [how, deletion] of Object.entries(deletions)) {
    it(`re-creates the group after ${how}, reports it, and processes new entries once`, async () => {
      // Arrange
      const stream = `ik-test:streams-nogroup:${run}:${how.split(' ')[0]}`;
      streams.push(stream, `${stream}:dlq`);
      const client = createClient({ url: env.redisUrl });
      const blocking = client.duplicate();
      await Promise.all([client.connect(), blocking.connect()]);
      clients.push(client, blocking);
      const seen: string[] = [];
      const errors: RedisStreamsConsumerErrorEvent[] = [];
      const consumer = await idempotentConsumer(
        client,
        (entry) => {
          seen.push(entry.fields.order ?? '');
        },
        {
          stream,
          group: 'workers',
          name: `nogroup-${run}`,
          idempotency: createIdempotency({ store: memoryStore() }),
          blockingClient: blocking,
          block: '100ms',
          hooks: { onConsumerError: (event) => errors.push(event) },
        },
      );
      await admin.sendCommand(['XADD', stream, '*', 'order', 'o1']);
      await waitUntil('o1', () => seen.length === 1);
      // Act
      await admin.sendCommand(deletion(stream));
      await admin.sendCommand(['XADD', stream, '*', 'order', 'o2']);
      await waitUntil('o2', () => seen.includes('o2'));
      await sleep(300);
      const closed = await consumer.close();
      // Assert: o2 ran once, o1 not again (the group was re-created after it), and the cause was reported.
      expect(seen).toEqual(['o1', 'o2']);
      // A read blocked at the time gets `UNBLOCKED the stream key no longer exists` (Redis 7) instead.
      expect(errors.length).toBeGreaterThanOrEqual(1);
      expect(errors[0]).toMatchObject({ consumer: `nogroup-${run}`, operation: 'read' });
      expect(String((errors[0]?.error as Error | undefined)?.message)).toMatch(
        /^(NOGROUP|UNBLOCKED)/,
      );
      expect(errors.filter((event) => event.operation === 'create-group')).toEqual([]);
      expect(closed).toBe(true);
    });
  }
});
