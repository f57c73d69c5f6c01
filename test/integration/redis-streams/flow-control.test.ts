/**
 * Flow control of the Redis Streams consumer against a real Redis: it reads no more entries than it has
 * free slots, reclaimed ones included. An entry read without a slot would wait in the process, its idle
 * time never reset, for `XAUTOCLAIM` to hand to another consumer while this one still holds it, and would
 * start whenever a slot frees, even after `close()` has resolved.
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { createClient } from 'redis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIdempotency, memoryStore } from '../../../src/index.js';
import {
  idempotentConsumer,
  type RedisStreamsClient,
  type StreamEntry,
} from '../../../src/redis-streams/index.js';
import { deferred } from '../../helpers/deferred.js';
import { env, requireService } from '../../helpers/env.js';
import { waitUntil as pollUntil } from '../../helpers/wait-until.js';

type Client = ReturnType<typeof createClient>;

// This file's timeout, polling every 10 ms.
const waitUntil = (what: string, predicate: () => boolean, timeoutMs = 5000) =>
  pollUntil(what, predicate, timeoutMs, 10);

describe('Redis Streams consumer: flow control', () => {
  const run = randomUUID().slice(0, 8);
  const streams: string[] = [];
  const clients: Array<{ destroy(): void }> = [];
  let admin: Client;

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

  /** Ids pending in group `workers` under `consumer`. */
  async function pendingUnder(stream: string, consumer: string): Promise<string[]> {
    const reply = (await admin.sendCommand([
      'XPENDING',
      stream,
      'workers',
      '-',
      '+',
      '100',
      consumer,
    ])) as Array<[string]>;
    return reply.map(([id]) => id);
  }

  it('reads no entry beyond its free slots after a reclaim, and starts none after close() resolved', async () => {
    // Arrange: entry `crashed` pending under a consumer that died, idle past minIdle; entry `fresh` unread.
    const stream = `ik-test:streams-flow:${run}:over-read`;
    streams.push(stream, `${stream}:dlq`);
    await admin.sendCommand(['XGROUP', 'CREATE', stream, 'workers', '0', 'MKSTREAM']);
    await admin.sendCommand(['XADD', stream, '*', 'x-idempotency-key', 'crashed']);
    await admin.sendCommand([
      'XREADGROUP',
      'GROUP',
      'workers',
      'ghost',
      'COUNT',
      '1',
      'STREAMS',
      stream,
      '>',
    ]);
    const fresh = (await admin.sendCommand([
      'XADD',
      stream,
      '*',
      'x-idempotency-key',
      'fresh',
    ])) as string;
    await sleep(150);
    const client = createClient({ url: env.redisUrl });
    const blocking = client.duplicate();
    await Promise.all([client.connect(), blocking.connect()]);
    clients.push(client, blocking);
    const gate = deferred();
    const handled: string[] = [];
    const consumer = await idempotentConsumer(
      client as unknown as RedisStreamsClient,
      async (entry: StreamEntry) => {
        handled.push(entry.fields['x-idempotency-key'] ?? '');
        if (entry.fields['x-idempotency-key'] === 'crashed') await gate.promise;
      },
      {
        stream,
        group: 'workers',
        consumer: 'busy',
        name: `flow-${run}`,
        idempotency: createIdempotency({ store: memoryStore() }),
        blockingClient: blocking as unknown as RedisStreamsClient,
        block: '100ms',
        concurrency: 1,
        minIdle: 100,
        claimInterval: '50ms',
        drainTimeout: '200ms',
      },
    );
    await waitUntil('the reclaimed entry to run', () => handled.length === 1);
    await sleep(200);
    // Assert: its only slot busy, the consumer left `fresh` unread (not pending under it, untouched).
    expect(handled).toEqual(['crashed']);
    expect(await pendingUnder(stream, 'busy')).not.toContain(fresh);
    // Act: close() gives up on the busy slot; then the slot frees.
    expect(await consumer.close()).toBe(false);
    gate.resolve();
    await consumer.done;
    await sleep(300);
    // Assert: nothing started after close() resolved.
    expect(handled).toEqual(['crashed']);
  });
});
