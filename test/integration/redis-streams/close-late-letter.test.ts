/**
 * `close()` and a dead letter given up on, against a real Redis: the letter's write, held by a link that
 * stalls, passes `brokerTimeout`, so its delivery settles and frees its slot; but the write goes on, and
 * when it lands it writes the letter and fires `onDeadLetter`. `close()` waits for it (within
 * `drainTimeout`): after `close()` resolved, nothing more is written and no hook fires. (Before, `close()`
 * resolved as soon as the slot was free, and the letter was written and reported behind it.)
 */
import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { describe, expect, it } from 'vitest';
import { createIdempotency, memoryStore } from '../../../src/index.js';
import { idempotentConsumer } from '../../../src/redis-streams/index.js';
import { closeThenRelease } from '../../helpers/close-hooks.js';
import { env } from '../../helpers/env.js';
import { streamsFixture } from '../../helpers/streams-fixture.js';
import { startRedisProxy } from '../../helpers/tcp-proxy.js';
import { waitUntil } from '../../helpers/wait-until.js';

describe('Redis Streams consumer: close() and a dead letter still being written', () => {
  const fixture = streamsFixture();
  const { run, streams, cleanups, add } = fixture;

  it('resolves only once a dead letter given up on has landed and been reported', async () => {
    // Arrange: the consumer's `client` goes through a proxy that holds what it sends from the failure on.
    const stream = `ik-test:streams-close-late-letter:${run}`;
    streams.push(stream, `${stream}:dlq`);
    const proxy = await startRedisProxy(env.redisUrl);
    const client = new Redis(proxy.url, { lazyConnect: true });
    client.on('error', () => {});
    await client.connect();
    const blocking = createClient({ url: env.redisUrl });
    await blocking.connect();
    cleanups.push(
      () => proxy.close(),
      () => client.disconnect(),
      () => blocking.destroy(),
    );
    const order: string[] = [];
    const consumer = await idempotentConsumer(
      client,
      () => {
        proxy.pause();
        throw new Error('card declined');
      },
      {
        stream,
        group: 'workers',
        name: `close-late-letter-${run}`,
        idempotency: createIdempotency({ store: memoryStore() }),
        maxDeliveries: 1,
        brokerTimeout: '200ms',
        drainTimeout: '3s',
        blockingClient: blocking,
        block: '100ms',
        claimInterval: '1h',
        minIdle: '1h',
        hooks: {
          onBrokerError: (event) => void order.push(`given up: ${event.operation}`),
          onDeadLetter: () => void order.push('dead letter'),
        },
      },
    );
    cleanups.push(() => consumer.close());
    await add(stream, 'pay-declined');
    await waitUntil('the letter to be given up on', () => order.length === 1, 5_000);

    // Act: close while the write is held; the link recovers a little later, and the write lands.
    const closed = await closeThenRelease(consumer, order, () => proxy.resume());

    // Assert
    expect(closed).toBe(true);
    expect(order).toEqual(['given up: dead_letter', 'dead letter', 'closed']);
    const letters = (await fixture.admin.sendCommand(['XLEN', `${stream}:dlq`])) as number;
    expect(letters).toBe(1);
  });
});
