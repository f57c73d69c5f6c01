/**
 * A dead letter written once, against a real Redis: the letter's `XADD` and the entry's `XACK` are one
 * script that writes only for an entry still pending. The case that wrote two letters: consumer A's write
 * stalls on its link (a TCP proxy holds it) and is given up on (`brokerTimeout`); consumer B reclaims the
 * entry, finds the letter recorded and writes it, acking the entry; then A's link recovers and its held
 * write lands, late: a second letter. Now A's late script finds the entry acked and writes nothing.
 *
 * And reported once: a write that finds its entry settled by another delivery says so, and is reported as
 * a duplicate, not as a second letter (`onDeadLetter` once per letter written; before, a write that landed
 * in time fired it whether or not it wrote, and dead-letter counts doubled across consumers).
 */
import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { describe, expect, it } from 'vitest';
import { createIdempotency, memoryStore } from '../../../src/index.js';
import { idempotentConsumer } from '../../../src/redis-streams/index.js';
import { env } from '../../helpers/env.js';
import { streamsFixture } from '../../helpers/streams-fixture.js';
import { otherProcessConsumer } from '../../helpers/streams-other-process.js';
import { startRedisProxy } from '../../helpers/tcp-proxy.js';
import { waitUntil } from '../../helpers/wait-until.js';

describe('Redis Streams consumer: dead letters written once', () => {
  const fixture = streamsFixture();
  const { run, streams, cleanups, add } = fixture;

  /** The dead letters' keys, in order. */
  async function letters(stream: string): Promise<string[]> {
    const reply = (await fixture.admin.sendCommand(['XRANGE', `${stream}:dlq`, '-', '+'])) as Array<
      [string, string[]]
    >;
    return reply.map(([, fields]) => fields[fields.indexOf('x-idempotency-key') + 1] ?? '');
  }

  const pending = async (stream: string) =>
    Number(((await fixture.admin.sendCommand(['XPENDING', stream, 'workers'])) as [number])[0]);

  it('writes no second letter when a write given up on lands after a redelivery wrote it', async () => {
    // Arrange: consumer A, its `client` through a proxy; one store shared with consumer B.
    const stream = `ik-test:streams-dead-letter-once:${run}`;
    streams.push(stream, `${stream}:dlq`);
    const engine = createIdempotency({ store: memoryStore() });
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
    const calls: string[] = [];
    const given: string[] = [];
    const lateLetters: Array<string | undefined> = [];
    const a = await idempotentConsumer(
      client,
      (_entry, context) => {
        calls.push(context.key);
        // The link stalls just as the letter is about to be written.
        proxy.pause();
        throw new Error('boom');
      },
      {
        stream,
        group: 'workers',
        name: `dead-letter-once-${run}`,
        consumer: 'a',
        idempotency: engine,
        maxDeliveries: 1,
        brokerTimeout: '300ms',
        drainTimeout: '1s',
        blockingClient: blocking,
        block: '100ms',
        claimInterval: '1h',
        minIdle: '1h',
        hooks: {
          onBrokerError: (event) => void given.push(event.operation),
          onDeadLetter: (event) => void lateLetters.push(event.key),
        },
      },
    );
    cleanups.push(() => a.close());
    await add(stream, 'dead-1');
    await waitUntil('the dead letter to be given up', () => given.length === 1, 10_000);
    expect(given).toEqual(['dead_letter']);
    await a.close();

    // B reclaims the entry, finds the letter recorded, writes it and acks the entry.
    const other = createClient({ url: env.redisUrl });
    await other.connect();
    cleanups.push(() => other.destroy());
    const written: Array<string | undefined> = [];
    const b = await idempotentConsumer(other, (_entry, context) => void calls.push(context.key), {
      stream,
      group: 'workers',
      name: `dead-letter-once-${run}`,
      consumer: 'b',
      idempotency: engine,
      maxDeliveries: 1,
      minIdle: '100ms',
      claimInterval: '100ms',
      hooks: { onDeadLetter: (event) => void written.push(event.key) },
    });
    cleanups.push(() => b.close());
    await waitUntil('B to write the letter', () => written.length === 1, 10_000);
    expect(await pending(stream)).toBe(0);

    // Act: A's link recovers; its held write reaches Redis, late.
    proxy.resume();
    await new Promise((resolve) => setTimeout(resolve, 500));

    // Assert: one letter (before: two), the handler run once, the letter reported once (by B: A's late
    // write wrote nothing, and is not reported).
    expect(await letters(stream)).toEqual(['dead-1']);
    expect(calls).toEqual(['dead-1']);
    expect(await pending(stream)).toBe(0);
    expect(written).toEqual(['dead-1']);
    expect(lateLetters).toEqual([]);
  });

  it('reports a write that finds its letter written by another delivery as a duplicate, not a second letter', async () => {
    // Arrange: consumer A's write is held by its link, within brokerTimeout; meanwhile consumer B
    // reclaims the entry, finds the letter recorded, writes it and acks the entry.
    const stream = `ik-test:streams-dead-letter-once:${run}:reported`;
    streams.push(stream, `${stream}:dlq`);
    const engine = createIdempotency({ store: memoryStore() });
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
    const calls: string[] = [];
    const events: string[] = [];
    const hooksOf = (who: string) => ({
      onDeadLetter: (event: { key: string | undefined }) =>
        void events.push(`${who}:dead-letter:${event.key}`),
      onDuplicate: (event: { key: string | undefined }) =>
        void events.push(`${who}:duplicate:${event.key}`),
      onBrokerError: (event: { operation: string }) =>
        void events.push(`${who}:broker-error:${event.operation}`),
    });
    const a = await idempotentConsumer(
      client,
      (_entry, context) => {
        calls.push(context.key);
        proxy.pause();
        throw new Error('boom');
      },
      {
        stream,
        group: 'workers',
        name: `dead-letter-once-${run}-reported`,
        consumer: 'a',
        idempotency: engine,
        maxDeliveries: 1,
        brokerTimeout: '20s',
        drainTimeout: '1s',
        blockingClient: blocking,
        block: '100ms',
        claimInterval: '1h',
        minIdle: '1h',
        hooks: hooksOf('a'),
      },
    );
    cleanups.push(() => a.close());
    await add(stream, 'dead-2');
    await waitUntil('A to run the handler', () => calls.length === 1, 10_000);
    // A records the letter (in the memory store) before its write: give it that moment.
    await new Promise((resolve) => setTimeout(resolve, 200));
    const other = createClient({ url: env.redisUrl });
    await other.connect();
    cleanups.push(() => other.destroy());
    // Of another process: a consumer of A's own leaves the entry A is handling to it.
    const otherProcess = await otherProcessConsumer();
    const b = await otherProcess(other, (_entry, context) => void calls.push(context.key), {
      stream,
      group: 'workers',
      name: `dead-letter-once-${run}-reported`,
      consumer: 'b',
      idempotency: engine,
      maxDeliveries: 1,
      minIdle: '100ms',
      claimInterval: '100ms',
      hooks: hooksOf('b'),
    });
    cleanups.push(() => b.close());
    await waitUntil('B to write the letter', () => events.includes('b:dead-letter:dead-2'), 10_000);

    // Act: A's link recovers; its held write reaches Redis, in time, and finds the entry acked.
    proxy.resume();
    await waitUntil('A to settle', () => events.some((event) => event.startsWith('a:')), 10_000);

    // Assert: one letter, reported once (before: A reported it too); A's delivery a duplicate.
    expect(await letters(stream)).toEqual(['dead-2']);
    expect(events.sort()).toEqual(['a:duplicate:dead-2', 'b:dead-letter:dead-2']);
    expect(calls).toEqual(['dead-2']);
    expect(await pending(stream)).toBe(0);
    expect(await a.close()).toBe(true);
  });
});
