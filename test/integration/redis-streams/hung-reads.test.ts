/**
 * The read loop's own commands (`XAUTOCLAIM` and `XPENDING` on `client`, `XREADGROUP` on the reader) on a
 * connection hung without a command timeout (ioredis's default), against a real Redis through a TCP proxy
 * that is cut or stalled once the consumer runs. Such a command used to stop the loop in silence: nothing
 * more was read, with every slot free, nothing was reported, and `close()` waited out `drainTimeout` for
 * the loop. Now a loop command unanswered past its bound (`brokerTimeout`; a blocking read `block` more)
 * is reported to `onConsumerError` (operation `read`, a `BrokerTimeoutError` naming the command), the loop
 * goes on waiting for that command's answer (sending another would only queue behind it on the same
 * connection) and carries on once it comes, and `close()` abandons it at once.
 */
import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { describe, expect, it } from 'vitest';
import { createIdempotency, memoryStore } from '../../../src/index.js';
import {
  idempotentConsumer,
  type RedisStreamsClient,
  type RedisStreamsConsumerErrorEvent,
  type RedisStreamsConsumerOptions,
} from '../../../src/redis-streams/index.js';
import { env } from '../../helpers/env.js';
import { streamsFixture } from '../../helpers/streams-fixture.js';
import { startRedisProxy, type TcpProxy } from '../../helpers/tcp-proxy.js';
import { waitUntil } from '../../helpers/wait-until.js';

describe('Redis Streams consumer: read-loop commands that never answer', () => {
  const fixture = streamsFixture();
  const { run, streams, cleanups, add } = fixture;

  /** An ioredis client (no command timeout) through a proxy of its own. */
  async function proxied(): Promise<{ client: Redis; proxy: TcpProxy }> {
    const proxy = await startRedisProxy(env.redisUrl);
    const client = new Redis(proxy.url, { lazyConnect: true });
    client.on('error', () => {});
    await client.connect();
    cleanups.push(
      () => proxy.close(),
      () => client.disconnect(),
    );
    return { client, proxy };
  }

  /**
   * A consumer of a new stream reading through `reader` (a blocking client) or polling `client`, whose
   * first entry has run; `brokerTimeout` 300 ms, `drainTimeout` 5 s.
   */
  async function started(
    name: string,
    client: RedisStreamsClient,
    extra: Pick<RedisStreamsConsumerOptions, 'blockingClient' | 'block' | 'claimInterval'>,
  ) {
    const stream = `ik-test:streams-hung-reads:${run}:${name}`;
    streams.push(stream, `${stream}:dlq`);
    const calls: string[] = [];
    const errors: RedisStreamsConsumerErrorEvent[] = [];
    const consumer = await idempotentConsumer(
      client,
      (_entry, context) => void calls.push(context.key),
      {
        stream,
        group: 'workers',
        name: `hung-reads-${name}-${run}`,
        idempotency: createIdempotency({ store: memoryStore() }),
        concurrency: 2,
        lease: '5s',
        brokerTimeout: '300ms',
        drainTimeout: '5s',
        minIdle: '1h',
        hooks: { onConsumerError: (event) => void errors.push(event) },
        ...extra,
      },
    );
    cleanups.push(() => consumer.close());
    await add(stream, `warm-up-${name}`);
    await waitUntil('the warm-up entry to run', () => calls.length === 1, 10_000);
    return { stream, consumer, calls, errors };
  }

  const message = (event: RedisStreamsConsumerErrorEvent | undefined) =>
    String((event?.error as Error | undefined)?.message);

  const timeouts = (errors: RedisStreamsConsumerErrorEvent[]) =>
    errors.filter((event) => (event.error as Error | undefined)?.name === 'BrokerTimeoutError');

  it('reports an XAUTOCLAIM that never answers, and close() abandons it at once', async () => {
    // Arrange: XAUTOCLAIM every 100 ms through `client`, new entries read through a direct blocking client.
    const { client, proxy } = await proxied();
    const blocking = createClient({ url: env.redisUrl });
    await blocking.connect();
    cleanups.push(() => blocking.destroy());
    const { stream, consumer, calls, errors } = await started('autoclaim', client, {
      blockingClient: blocking,
      block: '100ms',
      claimInterval: '100ms',
    });

    // Act: the link to `client` is cut; the next XAUTOCLAIM gets no answer.
    proxy.cut();

    // Assert: before, the loop waited in silence (no report in 10 s).
    await waitUntil('the hung XAUTOCLAIM to be reported', () => timeouts(errors).length > 0, 5_000);
    // Nothing more is read meanwhile (a read would only start entries whose settles hang).
    await add(stream, 'after-cut');
    const [report] = timeouts(errors);
    expect(report?.operation).toBe('read');
    expect(message(report)).toMatch(/XAUTOCLAIM.*300 ms/);
    // Reported once per hung command, not again and again while it hangs.
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    expect(timeouts(errors)).toHaveLength(1);
    expect(calls).toEqual(['warm-up-autoclaim']);
    // Nothing in flight: close() does not wait out drainTimeout (5 s) for a command known hung; it
    // resolves false, as the loop's command was abandoned.
    const before = performance.now();
    expect(await consumer.close()).toBe(false);
    expect(performance.now() - before).toBeLessThan(1_000);
  });

  it('carries on once a stalled XAUTOCLAIM answers late: entries added meanwhile run', async () => {
    // Arrange
    const { client, proxy } = await proxied();
    const blocking = createClient({ url: env.redisUrl });
    await blocking.connect();
    cleanups.push(() => blocking.destroy());
    const { stream, consumer, calls, errors } = await started('late', client, {
      blockingClient: blocking,
      block: '100ms',
      claimInterval: '100ms',
    });
    proxy.pause();
    await waitUntil(
      'the stalled XAUTOCLAIM to be reported',
      () => timeouts(errors).length > 0,
      5_000,
    );
    await add(stream, 'during-stall');
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(calls).toEqual(['warm-up-late']);

    // Act: the link recovers; the held XAUTOCLAIM is answered, late.
    proxy.resume();

    // Assert: the loop goes on from that answer (no second XAUTOCLAIM was queued behind it).
    await waitUntil('the entry added during the stall to run', () => calls.length === 2, 10_000);
    expect(calls).toEqual(['warm-up-late', 'during-stall']);
    expect(timeouts(errors)).toHaveLength(1);
    expect(await consumer.close()).toBe(true);
  });

  it('bounds a blocking XREADGROUP by block + brokerTimeout: a healthy one is never reported, a hung one is', async () => {
    // Arrange: reads block for 1 s, longer than brokerTimeout (300 ms), through a proxied reader.
    const { client: blocking, proxy } = await proxied();
    const client = createClient({ url: env.redisUrl });
    await client.connect();
    cleanups.push(() => client.destroy());
    const { stream, consumer, calls, errors } = await started('blocking', client, {
      blockingClient: blocking,
      block: '1s',
      claimInterval: '1h',
    });
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    expect(errors).toEqual([]);

    // Act
    proxy.cut();
    const cutAt = performance.now();
    await add(stream, 'after-cut');

    // Assert: reported between block and block + brokerTimeout (+ slack) after the cut.
    await waitUntil('the hung XREADGROUP to be reported', () => timeouts(errors).length > 0, 5_000);
    const after = performance.now() - cutAt;
    expect(after).toBeLessThan(2_500);
    expect(message(timeouts(errors)[0])).toMatch(/XREADGROUP.*1300 ms/);
    expect(calls).toEqual(['warm-up-blocking']);
    const before = performance.now();
    expect(await consumer.close()).toBe(false);
    expect(performance.now() - before).toBeLessThan(1_000);
  });

  it('reports a polling XREADGROUP that never answers', async () => {
    // Arrange: no blocking client; the loop polls `client` every 50 ms.
    const { client, proxy } = await proxied();
    const { consumer, errors } = await started('polling', client, { claimInterval: '1h' });

    // Act
    proxy.cut();

    // Assert
    await waitUntil('the hung XREADGROUP to be reported', () => timeouts(errors).length > 0, 5_000);
    expect(message(timeouts(errors)[0])).toMatch(/XREADGROUP.*300 ms/);
    const before = performance.now();
    expect(await consumer.close()).toBe(false);
    expect(performance.now() - before).toBeLessThan(1_000);
  });
});
