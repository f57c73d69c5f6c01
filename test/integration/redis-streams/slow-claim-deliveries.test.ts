/**
 * A store whose claim of each key answers later than `minIdle`, against a real Redis: this process's own
 * claim rounds took the entry it was handling (its idle time ran from the read, and was reset only once
 * the handler started), each one counting a delivery and starting a second one that met the key in
 * progress. The delivery count of one healthy delivery climbed past `maxDeliveries`, and the entry's next
 * handler failure was dead-lettered at once. Now the entry's idle time is reset from the delivery's start.
 */
import { describe, expect, it } from 'vitest';
import { createIdempotency, memoryStore, type Store } from '../../../src/index.js';
import { idempotentConsumer } from '../../../src/redis-streams/index.js';
import { streamsFixture } from '../../helpers/streams-fixture.js';
import { waitUntil } from '../../helpers/wait-until.js';

/** A memory store whose every claim is made at once but answered `lateMs` later (a slow store). */
function claimsLate(lateMs: number): Store {
  const inner = memoryStore();
  const store = Object.create(inner) as Store;
  // One claim per delivery, none batched.
  Object.defineProperty(store, 'capabilities', { value: { ...inner.capabilities, batch: false } });
  Object.defineProperty(store, 'claimMany', { value: undefined });
  store.claim = async (...args: Parameters<Store['claim']>) => {
    const answer = await inner.claim(...args);
    await new Promise((resolve) => setTimeout(resolve, lateMs));
    return answer;
  };
  return store;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('Redis Streams consumer: a store claim slower than minIdle', () => {
  const fixture = streamsFixture();
  const { run, streams, cleanups } = fixture;

  /** The highest delivery count `XPENDING` gives the entries of `stream`, sampled until `until` holds. */
  async function highestCount(stream: string, until: () => boolean): Promise<number> {
    let highest = 0;
    await waitUntil(
      'the entry to settle',
      async () => {
        const pending = (await fixture.admin.sendCommand([
          'XPENDING',
          stream,
          'workers',
          '-',
          '+',
          '10',
        ])) as unknown[][];
        for (const item of pending) highest = Math.max(highest, Number(item[3]));
        return until();
      },
      20_000,
      20,
    );
    return highest;
  }

  /** A consumer of `stream` over a store whose claims answer 1 s late (minIdle 300 ms). */
  async function slowClaimConsumer(
    stream: string,
    handler: (deliveryCount: number) => Promise<void>,
    seen: { retries: string[]; deadLetters: string[]; executed: number },
  ) {
    await fixture.admin.sendCommand(['XGROUP', 'CREATE', stream, 'workers', '0', 'MKSTREAM']);
    const consumer = await idempotentConsumer(
      fixture.admin,
      (_entry, context) => handler(context.deliveryCount),
      {
        stream,
        group: 'workers',
        name: `slow-claims-${run}`,
        consumer: 'live',
        idempotency: createIdempotency({ store: claimsLate(1000) }),
        pollInterval: '10ms',
        claimInterval: '20ms',
        minIdle: '300ms',
        maxDeliveries: 3,
        backoff: { initial: '100ms', factor: 1, jitter: false },
        hooks: {
          onRetry: (event) => void seen.retries.push(event.reason),
          onDeadLetter: (event) => void seen.deadLetters.push(event.reason),
          onExecuted: () => void seen.executed++,
        },
      },
    );
    cleanups.push(() => consumer.close());
    return consumer;
  }

  it('runs a healthy handler longer than minIdle once, its delivery count staying 1', async () => {
    // Arrange: the claim answers after more than three minIdle periods; the handler takes three more.
    const stream = `ik-test:streams-slow-claim-healthy:${run}`;
    streams.push(stream, `${stream}:dlq`);
    const runs: number[] = [];
    const seen = { retries: [] as string[], deadLetters: [] as string[], executed: 0 };
    const consumer = await slowClaimConsumer(
      stream,
      async (deliveryCount) => {
        runs.push(deliveryCount);
        await sleep(900);
      },
      seen,
    );

    // Act
    await fixture.add(stream, `slow-claim-healthy-${run}`);
    const highest = await highestCount(stream, () => seen.executed > 0);

    // Assert: one delivery, never taken by this process's own claim rounds (before: counts up to 4,
    // second deliveries retried as in progress).
    expect(runs).toEqual([1]);
    expect(highest).toBe(1);
    expect(seen.retries).toEqual([]);
    expect(seen.deadLetters).toEqual([]);
    expect(await fixture.letterField(stream, 'x-idempotency-dead-letter-reason')).toEqual([]);
    expect(await fixture.pendingCount(stream)).toBe(0);
    expect(await consumer.close()).toBe(true);
  });

  it('gives a failing handler all its maxDeliveries, not dead-lettering it early', async () => {
    // Arrange: the handler fails on its first two deliveries and succeeds on the third (maxDeliveries 3).
    const stream = `ik-test:streams-slow-claim-failing:${run}`;
    streams.push(stream, `${stream}:dlq`);
    const runs: number[] = [];
    const seen = { retries: [] as string[], deadLetters: [] as string[], executed: 0 };
    const consumer = await slowClaimConsumer(
      stream,
      async (deliveryCount) => {
        runs.push(deliveryCount);
        if (runs.length < 3) throw new Error('gateway timeout');
      },
      seen,
    );

    // Act
    await fixture.add(stream, `slow-claim-failing-${run}`);
    await highestCount(stream, () => seen.executed + seen.deadLetters.length > 0);

    // Assert: three deliveries counted 1, 2, 3 (before: the second counted 4 or more, and dead-lettered).
    expect(runs).toEqual([1, 2, 3]);
    expect(seen.retries).toEqual(['handler_error', 'handler_error']);
    expect(seen.deadLetters).toEqual([]);
    expect(seen.executed).toBe(1);
    expect(await fixture.letterField(stream, 'x-idempotency-dead-letter-reason')).toEqual([]);
    expect(await fixture.pendingCount(stream)).toBe(0);
    expect(await consumer.close()).toBe(true);
  });
});
