/**
 * An entry this process still handles, taken by its own claim round (its idle time passed `minIdle` while
 * the store's claim was slow and its idle resets did not reach Redis in time), then deleted from the stream, against a real
 * Redis. The claim round started a second delivery of it, which met the key in progress, retried, and,
 * ending first, removed the record of the entry held by the first delivery: a later claim round found the
 * id deleted, took it for abandoned and recorded it without its fields, and the first delivery's dead
 * letter found the id acked and was reported as a duplicate. The payload was lost. Now the entry is held
 * while any of its deliveries runs: the holder's letter carries the fields. (Since, this process's claim
 * rounds no longer take an entry it holds at all, stalled-loop-claims.test.ts: no second delivery starts,
 * and the holder's letter still carries the fields.)
 */
import { describe, expect, it } from 'vitest';
import { createIdempotency, memoryStore, type Store } from '../../../src/index.js';
import { loadScript } from '../../../src/redis/script-runner.js';
import { idempotentConsumer } from '../../../src/redis-streams/index.js';
import { setIdle } from '../../../src/redis-streams/scripts.gen.js';
import { streamsFixture } from '../../helpers/streams-fixture.js';
import { waitUntil } from '../../helpers/wait-until.js';

/** A memory store whose first claim is made at once but answered `lateMs` later (a slow store). */
function firstClaimLate(lateMs: number): Store {
  const inner = memoryStore();
  const store = Object.create(inner) as Store;
  // One claim per delivery, none batched.
  Object.defineProperty(store, 'capabilities', { value: { ...inner.capabilities, batch: false } });
  Object.defineProperty(store, 'claimMany', { value: undefined });
  let claims = 0;
  store.claim = async (...args: Parameters<Store['claim']>) => {
    const answer = await inner.claim(...args);
    claims++;
    if (claims === 1) await new Promise((resolve) => setTimeout(resolve, lateMs));
    return answer;
  };
  return store;
}

const SET_IDLE_SHA = loadScript(setIdle).sha;

describe('Redis Streams consumer: an entry held twice by one process, then deleted', () => {
  const fixture = streamsFixture();
  const { run, streams, cleanups } = fixture;

  it("records the holder's letter with the entry's fields, not a fieldless one", async () => {
    // Arrange: minIdle 300 ms, the first claim answered 600 ms late and the idle resets sent meanwhile
    // reaching Redis 600 ms late (an event loop stalled, say), for 1 s from the first run, so that this
    // consumer's own claim rounds find the entry idle past minIdle while it is held (before, one took it
    // and started a second delivery, which retried; retry delay 300 ms).
    const stream = `ik-test:streams-held-twice:${run}`;
    streams.push(stream, `${stream}:dlq`);
    await fixture.admin.sendCommand(['XGROUP', 'CREATE', stream, 'workers', '0', 'MKSTREAM']);
    let resetsLate = true;
    const client = {
      sendCommand: async (args: Array<string | Buffer>, options?: object) => {
        if (resetsLate && String(args[0]) === 'EVALSHA' && String(args[1]) === SET_IDLE_SHA) {
          await new Promise((resolve) => setTimeout(resolve, 600));
        }
        return fixture.admin.sendCommand(args, options as never);
      },
    };
    let failNow: () => void = () => {};
    const failed = new Promise<void>((resolve) => {
      failNow = resolve;
    });
    const runs: number[] = [];
    const retries: string[] = [];
    const deadLetters: string[] = [];
    let duplicates = 0;
    const consumer = await idempotentConsumer(
      client,
      async (_entry, context) => {
        runs.push(context.deliveryCount);
        await failed;
        throw new Error('card declined');
      },
      {
        stream,
        group: 'workers',
        name: `held-twice-${run}`,
        consumer: 'live',
        idempotency: createIdempotency({ store: firstClaimLate(600) }),
        pollInterval: '10ms',
        claimInterval: '50ms',
        minIdle: '300ms',
        minRetryDelay: '300ms',
        maxRetryDelay: '300ms',
        maxDeliveries: 1,
        hooks: {
          onRetry: (event) => void retries.push(event.reason),
          onDeadLetter: (event) => void deadLetters.push(event.reason),
          onDuplicate: () => void duplicates++,
        },
      },
    );
    cleanups.push(() => consumer.close());
    const id = String(
      await fixture.admin.sendCommand([
        'XADD',
        stream,
        '*',
        'x-idempotency-key',
        `held-twice-${run}`,
        'amount',
        '4200',
      ]),
    );
    await waitUntil('the first delivery to run', () => runs.length === 1);
    await new Promise((resolve) => setTimeout(resolve, 1000));
    resetsLate = false;

    // Act: the entry deleted while its first delivery runs; claim rounds go on past minIdle; it fails.
    await fixture.admin.sendCommand(['XDEL', stream, id]);
    await new Promise((resolve) => setTimeout(resolve, 800));
    failNow();
    await waitUntil('the delivery to settle', () => deadLetters.length + duplicates > 0);

    // Assert: one letter, the holder's, with the payload (before: reason `deleted`, no fields, and the
    // holder's letter reported as a duplicate).
    expect(runs).toEqual([1]);
    expect(retries).toEqual([]);
    expect(await fixture.letterField(stream, 'x-idempotency-dead-letter-reason')).toEqual([
      'handler_error',
    ]);
    expect(await fixture.letterField(stream, 'amount')).toEqual(['4200']);
    expect(deadLetters).toEqual(['handler_error']);
    expect(duplicates).toBe(0);
    expect(await fixture.pendingCount(stream)).toBe(0);
    expect(await consumer.close()).toBe(true);
  });
});
