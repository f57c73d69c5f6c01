/**
 * A store whose claims answer later than the consumer's `ack_wait`, against a real NATS server: `working()`
 * began only once the handler started, so while the store's claim was made (and while a decision taken
 * without the handler was carried out: a duplicate's ack, a dead letter's record), the server's AckWait ran
 * unchecked and it redelivered the message this process still held. Each such redelivery counted toward
 * `maxDeliveries` (a failing handler was dead-lettered early), was found in progress and `nak()`ed, or
 * settled the message a second time (a duplicate reported twice, a dead letter written twice). A
 * redelivery reading the dead letter recorded for it did so without `working()` too. Now `working()` is
 * sent from the delivery's start.
 */
import type { JsMsg } from '@nats-io/jetstream';
import { afterAll, describe, expect, it } from 'vitest';
import { createIdempotency, memoryStore, type Store } from '../../../src/index.js';
import {
  idempotentConsumer,
  type NatsConsumerOptions,
  type NatsPublisher,
} from '../../../src/nats/index.js';
import { waitUntil } from '../../helpers/wait-until.js';
import { type NatsFixture, natsFixture } from './setup.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * A memory store whose every claim (or, with `call: 'get'`, every read of a record) is made at once but
 * answered `late.ms` later (a slow store), read at each call.
 */
function answersLate(late: { ms: number }, call: 'claim' | 'get' = 'claim'): Store {
  const inner = memoryStore();
  const store = Object.create(inner) as Store;
  // One claim per delivery, none batched.
  Object.defineProperty(store, 'capabilities', { value: { ...inner.capabilities, batch: false } });
  Object.defineProperty(store, 'claimMany', { value: undefined });
  // Reads through `get` (inspectKey's fallback), so that a slow one is slow everywhere.
  Object.defineProperty(store, 'inspect', { value: undefined });
  store.claim = async (...args: Parameters<Store['claim']>) => {
    const answer = await inner.claim(...args);
    if (call === 'claim') await sleep(late.ms);
    return answer;
  };
  store.get = async (...args: Parameters<Store['get']>) => {
    const answer = await inner.get(...args);
    if (call === 'get') await sleep(late.ms);
    return answer;
  };
  return store;
}

/** What the hooks and the handler saw: each entry names the event and the delivery count it came with. */
type Seen = string[];

describe('NATS consumer: a store claim slower than ack_wait', () => {
  const fixtures: NatsFixture[] = [];

  afterAll(async () => {
    for (const f of fixtures) await f.destroy();
  });

  /**
   * A consumer on a fresh fixture (ack_wait 1 s) over a store whose claims answer 1.5 s late (unless
   * `extra` gives another); `run` is the handler, given the delivery count.
   */
  async function slowClaimConsumer(
    label: string,
    run: (deliveryCount: number) => void | Promise<void>,
    seen: Seen,
    extra: Partial<NatsConsumerOptions> = {},
  ) {
    const f = await natsFixture(`slow-claim-${label}`, 1000);
    fixtures.push(f);
    const consumer = await idempotentConsumer(
      await f.js.consumers.get(f.stream, f.durable),
      (message) => {
        const { deliveryCount } = (message as JsMsg).info;
        seen.push(`run ${deliveryCount}`);
        return run(deliveryCount);
      },
      {
        name: f.stream,
        idempotency: createIdempotency({ store: answersLate({ ms: 1_500 }) }),
        maxDeliveries: 3,
        backoff: () => 50,
        minRetryDelay: '50ms',
        maxRetryDelay: '100ms',
        publisher: f.js,
        deadLetterSubject: f.dlq,
        hooks: {
          onExecuted: (event) => void seen.push(`executed ${event.deliveryCount}`),
          onDuplicate: (event) => void seen.push(`duplicate ${event.deliveryCount}`),
          onRetry: (event) => void seen.push(`retry ${event.reason} ${event.deliveryCount}`),
          onDeadLetter: (event) =>
            void seen.push(`dead-letter ${event.reason} ${event.deliveryCount}`),
        },
        ...extra,
      },
    );
    return { f, consumer };
  }

  /**
   * Wait until `done` holds and nothing is pending, then longer than `ack_wait` (time for the server to
   * redeliver anything it still would); resolves to how many deliveries the server made in all.
   */
  async function deliveriesOnceSettled(f: NatsFixture, done: () => boolean): Promise<number> {
    await waitUntil('the messages to settle', done, 30_000);
    await waitUntil(
      'nothing pending',
      async () => (await f.jsm.consumers.info(f.stream, f.durable)).num_ack_pending === 0,
      30_000,
    );
    await sleep(1_500);
    return (await f.jsm.consumers.info(f.stream, f.durable)).delivered.consumer_seq;
  }

  it('runs a healthy message once, on one delivery', async () => {
    const seen: Seen = [];
    const { f, consumer } = await slowClaimConsumer('healthy', () => {}, seen);

    // Act
    await f.publish('pay-healthy');
    const deliveries = await deliveriesOnceSettled(f, () => seen.includes('executed 1'));

    // Assert: before, the server redelivered it during the claim (a second delivery, found in progress
    // and nak()ed: `retry in_progress 2`).
    expect(seen).toEqual(['run 1', 'executed 1']);
    expect(deliveries).toBe(1);
    expect(await consumer.close()).toBe(true);
  });

  it('gives a failing handler all its maxDeliveries, not dead-lettering it early', async () => {
    // Arrange: the handler fails on its first two runs and succeeds on the third (maxDeliveries 3).
    const seen: Seen = [];
    let runs = 0;
    const { f, consumer } = await slowClaimConsumer(
      'failing',
      () => {
        runs++;
        if (runs < 3) throw new Error('gateway timeout');
      },
      seen,
    );

    // Act
    await f.publish('pay-failing');
    const deliveries = await deliveriesOnceSettled(f, () =>
      seen.some((event) => event.startsWith('executed') || event.startsWith('dead-letter')),
    );

    // Assert: three deliveries counted 1, 2, 3 (before: the second run came on delivery 3, and was
    // dead-lettered; delivery 5, meeting no letter recorded yet, ran the handler a third time).
    expect(seen).toEqual([
      'run 1',
      'retry handler_error 1',
      'run 2',
      'retry handler_error 2',
      'run 3',
      'executed 3',
    ]);
    expect(deliveries).toBe(3);
    expect(await f.deadLetters()).toHaveLength(0);
    expect(await consumer.close()).toBe(true);
  });

  it('acks a duplicate once, on one delivery', async () => {
    // Arrange: two messages with the same key in their payload (the key function reads it); the store
    // answers at once until the first one completed. No cache of completed keys: the duplicate is looked
    // up in the store, as one completed by another process is.
    const seen: Seen = [];
    const late = { ms: 0 };
    const { f, consumer } = await slowClaimConsumer('duplicate', () => {}, seen, {
      key: (message) => new TextDecoder().decode(message.data),
      idempotency: createIdempotency({ store: answersLate(late), cache: false }),
    });
    await f.publish('pay-dup-a', 'order-1');
    await waitUntil('the first message', () => seen.includes('executed 1'), 30_000);

    // Act: the second one, its claim answered 1.5 s late.
    late.ms = 1_500;
    await f.publish('pay-dup-b', 'order-1');
    const deliveries = await deliveriesOnceSettled(f, () => seen.includes('duplicate 1'));

    // Assert: before, the server redelivered the duplicate during its claim, and it was acked and
    // reported twice (`duplicate 1`, `duplicate 2`: three deliveries).
    expect(seen).toEqual(['run 1', 'executed 1', 'duplicate 1']);
    expect(deliveries).toBe(2);
    expect(await consumer.close()).toBe(true);
  });

  it('writes the dead letter of a message without a key once, on one delivery', async () => {
    // Arrange: a key function that finds none; the letter's record in the store is a slow claim too.
    const seen: Seen = [];
    const { f, consumer } = await slowClaimConsumer('no-key', () => {}, seen, {
      key: () => undefined,
    });

    // Act
    await f.publish('pay-no-key');
    const deliveries = await deliveriesOnceSettled(f, () =>
      seen.includes('dead-letter invalid_key 1'),
    );

    // Assert: before, the server redelivered it while its letter was recorded, and that delivery wrote a
    // second letter.
    expect(seen).toEqual(['dead-letter invalid_key 1']);
    expect(await f.deadLetters()).toHaveLength(1);
    expect(deliveries).toBe(1);
    expect(await consumer.close()).toBe(true);
  });

  it('a redelivery reading its recorded dead letter slowly writes it once', async () => {
    // Arrange: the handler always fails (maxDeliveries 1); the first publish of the letter fails, so the
    // message is nak()ed with its letter recorded, and its redelivery reads the record: only the store's
    // reads are slow (1.5 s), which only that redelivery makes.
    const seen: Seen = [];
    let publishes = 0;
    const f0: { js?: NatsPublisher } = {};
    const publisher: NatsPublisher = {
      publish: async (...args) => {
        publishes++;
        if (publishes === 1) throw new Error('DLQ unavailable');
        if (f0.js === undefined) throw new Error('no fixture');
        return f0.js.publish(...args);
      },
    };
    const { f, consumer } = await slowClaimConsumer(
      'recorded-letter',
      () => {
        throw new Error('card declined');
      },
      seen,
      {
        maxDeliveries: 1,
        publisher,
        idempotency: createIdempotency({ store: answersLate({ ms: 1_500 }, 'get') }),
      },
    );
    f0.js = f.js;

    // Act
    await f.publish('pay-recorded-letter');
    const deliveries = await deliveriesOnceSettled(f, () =>
      seen.some((event) => event.startsWith('dead-letter')),
    );

    // Assert: one run, one failed write (nak()ed), one letter written by delivery 2 (before, the server
    // redelivered the message while delivery 2 read the record, and delivery 3 wrote it again).
    expect(seen).toEqual(['run 1', 'dead-letter handler_error 2']);
    expect(publishes).toBe(2);
    expect(await f.deadLetters()).toHaveLength(1);
    expect(deliveries).toBe(2);
    expect(await consumer.close()).toBe(true);
  });
});
