/**
 * Broker settle calls that never answer, against a real Redis. The consumer's `client` is an ioredis
 * client (no command timeout: its default) through a TCP proxy that is cut once the consumer runs, so its
 * `XACK`, `XCLAIM` (a retry's idle time) and `XADD` (a dead letter) get no answer, as on a connection hung
 * without closing; entries are still read through a direct blocking client. Each such settle used to hold
 * its handler slot for good: with `concurrency: 2` and two hung settles, no later entry ran, and `close()`
 * gave up after `drainTimeout` with both slots held. Now each is waited for at most `brokerTimeout`
 * (default: `storeTimeout`, here the lease, 1 s), reported to `onBrokerError`, and its slot freed; nothing
 * is acked that was not.
 */
import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { describe, expect, it } from 'vitest';
import {
  createIdempotency,
  type Duration,
  type Idempotency,
  memoryStore,
} from '../../../src/index.js';
import { idempotentConsumer, type StreamEntry } from '../../../src/redis-streams/index.js';
import { env } from '../../helpers/env.js';
import { streamsFixture } from '../../helpers/streams-fixture.js';
import { startRedisProxy, type TcpProxy } from '../../helpers/tcp-proxy.js';
import { waitUntil } from '../../helpers/wait-until.js';

/** What one consumer did, by key. */
function recorder() {
  const events = {
    calls: [] as string[],
    executed: [] as Array<string | undefined>,
    deadLetters: [] as Array<string | undefined>,
    brokerErrors: [] as Array<{ key: string | undefined; operation: string; error: unknown }>,
  };
  const hooks = {
    onExecuted: (event: { key: string | undefined }) => void events.executed.push(event.key),
    onDeadLetter: (event: { key: string | undefined }) => void events.deadLetters.push(event.key),
    onBrokerError: (event: { key: string | undefined; operation: string; error: unknown }) =>
      void events.brokerErrors.push(event),
  };
  return { events, hooks };
}

describe('Redis Streams consumer: settle calls that never answer', () => {
  const fixture = streamsFixture();
  const { run, streams, cleanups, add } = fixture;

  /** Entries of the group read and not acked. */
  async function pending(stream: string): Promise<number> {
    const [count] = (await fixture.admin.sendCommand(['XPENDING', stream, 'workers'])) as [number];
    return Number(count);
  }

  /** Dead letters' keys, in order. */
  async function letters(stream: string): Promise<string[]> {
    const reply = (await fixture.admin.sendCommand(['XRANGE', `${stream}:dlq`, '-', '+'])) as Array<
      [string, string[]]
    >;
    return reply.map(([, fields]) => fields[fields.indexOf('x-idempotency-key') + 1] ?? '');
  }

  /**
   * A consumer of a new stream whose `client` goes through a proxy, cut (or paused: what it sends is held,
   * then delivered late) once a first entry ran (the group
   * is created and the first `XAUTOCLAIM` answered by then; `claimInterval: '1h'` sends no other, so
   * reading only needs the direct blocking client).
   */
  async function hungConsumer(
    name: string,
    handler: (entry: StreamEntry) => void,
    engine: Idempotency,
    extra: { maxDeliveries?: number; drainTimeout?: Duration } = {},
    stall: 'cut' | 'pause' = 'cut',
  ) {
    const stream = `ik-test:streams-hung-settles:${run}:${name}`;
    streams.push(stream, `${stream}:dlq`);
    const proxy: TcpProxy & { url: string } = await startRedisProxy(env.redisUrl);
    const client = new Redis(proxy.url, { lazyConnect: true });
    client.on('error', () => {});
    await client.connect();
    const blocking = createClient({ url: env.redisUrl });
    await blocking.connect();
    const { events, hooks } = recorder();
    const consumer = await idempotentConsumer(
      client,
      (entry, context) => {
        events.calls.push(context.key);
        return handler(entry);
      },
      {
        stream,
        group: 'workers',
        name: `hung-settles-${name}-${run}`,
        idempotency: engine,
        lease: '1s',
        concurrency: 2,
        drainTimeout: '5s',
        blockingClient: blocking,
        block: '100ms',
        claimInterval: '1h',
        minIdle: '1h',
        hooks,
        ...extra,
      },
    );
    cleanups.push(
      () => proxy.close(),
      () => client.disconnect(),
      () => blocking.destroy(),
      () => consumer.close(),
    );
    await add(stream, `warm-up-${name}`);
    await waitUntil('the warm-up entry to be acked', () => events.executed.length === 1, 10_000);
    if (stall === 'cut') proxy.cut();
    else proxy.pause();
    return { stream, consumer, events, proxy };
  }

  it('frees the slots of acks that never answer: later entries run, nothing counted acked', async () => {
    // Arrange: two entries whose XACK hangs hold both slots.
    const { stream, consumer, events } = await hungConsumer(
      'ack',
      () => {},
      createIdempotency({ store: memoryStore() }),
    );
    await add(stream, 'ack-1');
    await add(stream, 'ack-2');
    await waitUntil('both handlers to run', () => events.calls.length === 3, 10_000);

    // Act
    for (const key of ['after-1', 'after-2', 'after-3']) await add(stream, key);

    // Assert: before, no later entry ever ran.
    await waitUntil('the later entries to run', () => events.calls.length === 6, 10_000);
    const acks = events.brokerErrors.filter((event) => event.operation === 'ack');
    expect(acks.map((event) => event.key)).toEqual(expect.arrayContaining(['ack-1', 'ack-2']));
    expect(String(acks[0]?.error)).toMatch(/XACK|ack/);
    // Only the warm-up's ack was answered: no other entry is reported acked, and every one is pending.
    expect(events.executed).toEqual(['warm-up-ack']);
    expect(await pending(stream)).toBe(5);
    // Nothing left in flight: close() drains at once, without waiting out drainTimeout.
    const started = performance.now();
    await waitUntil(
      'the later acks to be given up',
      () => events.brokerErrors.filter((event) => event.operation === 'ack').length === 5,
      10_000,
    );
    expect(await consumer.close()).toBe(true);
    expect(performance.now() - started).toBeLessThan(4_000);
  });

  it('frees the slots of retries whose XCLAIM never answers, never acking them', async () => {
    // Arrange: two failing handlers whose retry (XCLAIM … IDLE) hangs hold both slots.
    const { stream, events } = await hungConsumer(
      'retry',
      (entry) => {
        if (entry.fields['x-idempotency-key']?.startsWith('retry-')) throw new Error('boom');
      },
      createIdempotency({ store: memoryStore() }),
    );
    await add(stream, 'retry-1');
    await add(stream, 'retry-2');
    await waitUntil('both handlers to run', () => events.calls.length === 3, 10_000);

    // Act
    for (const key of ['after-1', 'after-2']) await add(stream, key);

    // Assert
    await waitUntil('the later entries to run', () => events.calls.length === 5, 10_000);
    const retries = events.brokerErrors.filter((event) => event.operation === 'retry');
    expect(retries.map((event) => event.key)).toEqual(
      expect.arrayContaining(['retry-1', 'retry-2']),
    );
    expect(await pending(stream)).toBe(4);
  });

  it('frees the slot of a dead letter whose XADD never answers; its redelivery writes the recorded letter, never runs the handler', async () => {
    // Arrange: one store shared by this consumer and the one that takes the entries over later.
    const engine = createIdempotency({ store: memoryStore() });
    const { stream, consumer, events, proxy } = await hungConsumer(
      'dead-letter',
      (entry) => {
        if (entry.fields['x-idempotency-key']?.startsWith('dead-')) throw new Error('boom');
      },
      engine,
      { maxDeliveries: 1, drainTimeout: '2s' },
    );
    await add(stream, 'dead-1');
    await add(stream, 'dead-2');
    await waitUntil('both handlers to run', () => events.calls.length === 3, 10_000);

    // Act
    for (const key of ['after-1', 'after-2']) await add(stream, key);

    // Assert: the slots are freed, the dead letters reported unwritten, and nothing else tried for them
    // (no retry carrying the letter: the hung write may yet land, and a second path would write twice).
    await waitUntil('the later entries to run', () => events.calls.length === 5, 10_000);
    const given = events.brokerErrors.filter((event) => event.key?.startsWith('dead-'));
    expect(given.map((event) => event.operation).sort()).toEqual(['dead_letter', 'dead_letter']);
    expect(events.deadLetters).toEqual([]);
    // The hung writes are still going (one landing would fire onDeadLetter): close() waits for them
    // within drainTimeout, and says they did not settle. (Before, it resolved true at once, and a write
    // landing afterwards reported its letter behind it.)
    expect(await consumer.close()).toBe(false);

    // The hung XADDs never reached Redis (the cut drops them). Another consumer reclaims the entries:
    // each redelivery finds its letter recorded before the write and writes it, once, without running
    // the handler again.
    proxy.restore();
    const client = createClient({ url: env.redisUrl });
    await client.connect();
    cleanups.push(() => client.destroy());
    const after = recorder();
    const takeover = await idempotentConsumer(
      client,
      (_entry, context) => void after.events.calls.push(context.key),
      {
        stream,
        group: 'workers',
        name: `hung-settles-dead-letter-${run}`,
        idempotency: engine,
        maxDeliveries: 1,
        minIdle: '100ms',
        claimInterval: '100ms',
        hooks: after.hooks,
      },
    );
    cleanups.push(() => takeover.close());
    await waitUntil(
      'both letters to be written',
      () => after.events.deadLetters.length === 2,
      10_000,
    );
    expect((await letters(stream)).sort()).toEqual(['dead-1', 'dead-2']);
    expect(after.events.calls.filter((key) => key.startsWith('dead-'))).toEqual([]);
    expect(events.calls.filter((key) => key.startsWith('dead-'))).toHaveLength(2);
  });

  it('carries out a settle given up on once its answer comes late: the dead letter written once, its entry acked', async () => {
    // Arrange: the link stalls, holding what the consumer sends, instead of dropping it.
    const { stream, consumer, events, proxy } = await hungConsumer(
      'late',
      (entry) => {
        if (entry.fields['x-idempotency-key']?.startsWith('dead-')) throw new Error('boom');
      },
      createIdempotency({ store: memoryStore() }),
      { maxDeliveries: 1 },
      'pause',
    );
    await add(stream, 'dead-1');
    await add(stream, 'ack-1');
    await waitUntil(
      'the dead letter and the ack to be given up',
      () => events.brokerErrors.length === 2,
      10_000,
    );
    expect(events.brokerErrors.map((event) => event.operation).sort()).toEqual([
      'ack',
      'dead_letter',
    ]);
    expect(await pending(stream)).toBe(2);

    // Act: the link recovers; the held XADD and XACK reach Redis, late.
    proxy.resume();

    // Assert: the late XADD's answer is followed by its XACK; nothing was sent a second way. The letter
    // written late is reported then, once (before: never, and nothing said the message was dead-lettered).
    await waitUntil('both entries to be acked', async () => (await pending(stream)) === 0, 10_000);
    expect(await letters(stream)).toEqual(['dead-1']);
    await waitUntil('the late letter to be reported', () => events.deadLetters.length > 0, 2_000);
    expect(events.deadLetters).toEqual(['dead-1']);
    expect(events.calls.filter((key) => key !== 'warm-up-late').sort()).toEqual([
      'ack-1',
      'dead-1',
    ]);
    expect(events.brokerErrors).toHaveLength(2);
    expect(await consumer.close()).toBe(true);
  });
});
