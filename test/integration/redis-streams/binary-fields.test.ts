/**
 * A binary field value (a protobuf payload: not valid UTF-8) reaches the handler byte for byte through
 * `entry.buffers`, and the dead letter copies it unchanged, on both client libraries. `entry.fields` keeps
 * the UTF-8 text, as before.
 */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIdempotency, memoryStore } from '../../../src/index.js';
import {
  idempotentConsumer,
  type RedisStreamsClient,
  type StreamEntry,
} from '../../../src/redis-streams/index.js';
import { env, requireService } from '../../helpers/env.js';
import { waitUntil as pollUntil } from '../../helpers/wait-until.js';

const body = Buffer.from([0x08, 0x96, 0x01, 0xff, 0xfe, 0x80]);

// This file's timeout, polling every 10 ms.
const waitUntil = (what: string, predicate: () => boolean, timeoutMs = 5000) =>
  pollUntil(what, predicate, timeoutMs, 10);

describe('Redis Streams consumer: binary field values', () => {
  const run = randomUUID().slice(0, 8);
  const streams: string[] = [];
  const closers: Array<() => unknown> = [];
  let admin: Redis;

  beforeAll(async () => {
    await requireService('Redis', env.redisUrl);
    admin = new Redis(env.redisUrl);
  });

  afterAll(async () => {
    for (const close of closers) await close();
    if (streams.length > 0) await admin?.del(...streams);
    admin?.disconnect();
  });

  const libraries: Record<string, () => Promise<RedisStreamsClient>> = {
    'node-redis': async () => {
      const client = createClient({ url: env.redisUrl });
      await client.connect();
      closers.push(() => client.destroy());
      return client;
    },
    'node-redis RESP3': async () => {
      const client = createClient({ url: env.redisUrl, RESP: 3 });
      await client.connect();
      closers.push(() => client.destroy());
      return client as unknown as RedisStreamsClient;
    },
    ioredis: async () => {
      const client = new Redis(env.redisUrl);
      closers.push(() => client.disconnect());
      return client;
    },
  };

  for (const [lib, connect] of Object.entries(libraries)) {
    it(`hands the handler and the dead letter the exact bytes (${lib})`, async () => {
      // Arrange: a handler that fails on the only delivery allowed, so the entry is dead-lettered.
      const stream = `ik-test:streams-binary:${run}:${lib.replace(/\W+/g, '-')}`;
      streams.push(stream, `${stream}:dlq`);
      const received: StreamEntry[] = [];
      let deadLetters = 0;
      const consumer = await idempotentConsumer(
        await connect(),
        (entry) => {
          received.push(entry);
          throw new Error('cannot decode');
        },
        {
          stream,
          group: 'workers',
          name: `binary-${run}`,
          idempotency: createIdempotency({ store: memoryStore() }),
          maxDeliveries: 1,
          hooks: { onDeadLetter: () => void deadLetters++ },
        },
      );
      // Act
      await admin.xadd(stream, '*', 'x-idempotency-key', 'k1', 'body', body);
      await waitUntil('the dead letter', () => deadLetters === 1);
      await consumer.close();
      // Assert
      const [entry] = received;
      expect(entry?.buffers.body?.toString('hex')).toBe(body.toString('hex'));
      expect(entry?.fields.body).toBe(body.toString('utf8'));
      expect(entry?.fields['x-idempotency-key']).toBe('k1');
      const letters = (await admin.xrangeBuffer(`${stream}:dlq`, '-', '+')) as Array<
        [Buffer, Buffer[]]
      >;
      expect(letters).toHaveLength(1);
      const flat = letters[0]![1];
      const index = flat.findIndex((name, i) => i % 2 === 0 && name.toString() === 'body');
      expect(flat[index + 1]?.toString('hex')).toBe(body.toString('hex'));
    });
  }
});
