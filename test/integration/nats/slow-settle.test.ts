/**
 * A dead letter slower than the consumer's `ack_wait`, against a real NATS server: the handler failed on
 * its last allowed delivery, and the consumer is still carrying the decision out when `ack_wait` runs out.
 *
 * - A record of the letter in a slow store: `working()` stopped as soon as the failed handler's claim was
 *   released, so the server redelivered the message meanwhile; that delivery found no letter recorded yet
 *   and ran the handler again, past `maxDeliveries`. Now `working()` goes on until the letter is written
 *   and the message terminated: the server never redelivers it.
 * - A DLQ publish whose PubAck is slow: each redelivery found the letter recorded and wrote it again, one
 *   letter and one `onDeadLetter` each. Now one.
 *
 * And what the keep-alive's guard rests on: a `working()` reaching the server after `nak(delay)` moves the
 * redelivery to `ack_wait` after it (sooner or later than the delay), so the consumer never sends one once
 * it has called `retry`.
 */
import type { JsMsg } from '@nats-io/jetstream';
import { afterAll, describe, expect, it } from 'vitest';
import { createIdempotency, type Idempotency, memoryStore } from '../../../src/index.js';
import {
  idempotentConsumer,
  type NatsConsumerOptions,
  type NatsPublisher,
} from '../../../src/nats/index.js';
import { waitUntil } from '../../helpers/wait-until.js';
import { type NatsFixture, natsFixture } from './setup.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** `engine`, whose records of dead letters each take `ms` before they start. */
function slowLetterRecords(engine: Idempotency, ms: number): Idempotency {
  return new Proxy(engine, {
    get(target, property) {
      const value = Reflect.get(target, property, target);
      if (property !== 'run' || typeof value !== 'function') {
        return typeof value === 'function' ? value.bind(target) : value;
      }
      return async (...args: Parameters<Idempotency['run']>) => {
        if (args[0].scope?.startsWith('dead-letter:')) await sleep(ms);
        return value.apply(target, args);
      };
    },
  });
}

/**
 * Fixture `f`'s publisher, each publish starting 2.5 s late; the first `failing` ones fail at once instead.
 * `publishes` counts them all.
 */
function slowPublisher(f: NatsFixture, failing = 0) {
  const js: NatsPublisher = f.js;
  const counted = { publishes: 0 };
  const publisher: NatsPublisher = {
    publish: async (...args) => {
      counted.publishes++;
      if (counted.publishes <= failing) throw new Error('DLQ unavailable');
      await sleep(2_500);
      return js.publish(...args);
    },
  };
  return { publisher, counted };
}

describe('NATS consumer: a dead letter slower than ack_wait', () => {
  const fixtures: NatsFixture[] = [];

  afterAll(async () => {
    for (const f of fixtures) await f.destroy();
  });

  /** Options for fixture `f`'s consumer, recording its hooks' reports into `events`. */
  const options = (
    f: NatsFixture,
    idempotency: Idempotency,
    maxDeliveries: number,
    events: string[],
    publisher: NatsPublisher = f.js,
  ): NatsConsumerOptions => ({
    name: f.stream,
    idempotency,
    maxDeliveries,
    backoff: () => 50,
    minRetryDelay: '50ms',
    maxRetryDelay: '100ms',
    publisher,
    deadLetterSubject: f.dlq,
    hooks: {
      onExecuted: () => void events.push('executed'),
      onDuplicate: () => void events.push('duplicate'),
      onRetry: () => void events.push('retry'),
      onDeadLetter: () => void events.push('dead-letter'),
    },
  });

  /**
   * A consumer on fixture `f` whose handler always fails, noting the delivery count of each run in `calls`.
   */
  const failingConsumer = async (f: NatsFixture, consumerOptions: NatsConsumerOptions) => {
    const calls: number[] = [];
    const consumer = await idempotentConsumer(
      await f.js.consumers.get(f.stream, f.durable),
      (message) => {
        calls.push((message as JsMsg).info.deliveryCount);
        throw new Error('card declined');
      },
      consumerOptions,
    );
    return { consumer, calls };
  };

  /** Wait for `count` letters and nothing pending, then for more than `ack_wait`: time to redeliver. */
  const settled = async (f: NatsFixture, count: number) => {
    await waitUntil('the letters', async () => (await f.deadLetters()).length >= count);
    await waitUntil(
      'nothing pending',
      async () => (await f.jsm.consumers.info(f.stream, f.durable)).num_ack_pending === 0,
    );
    await sleep(1_500);
  };

  it.each([[1], [2]])(
    'maxDeliveries %i: a letter recorded slowly is not redelivered, nor its handler run again',
    async (maxDeliveries) => {
      // Arrange: ack_wait 1 s; the store takes 2.5 s to record each dead letter.
      const f = await natsFixture(`slow-record-${maxDeliveries}`, 1000);
      fixtures.push(f);
      const engine = slowLetterRecords(createIdempotency({ store: memoryStore() }), 2_500);
      const events: string[] = [];
      const { consumer, calls } = await failingConsumer(
        f,
        options(f, engine, maxDeliveries, events),
      );

      // Act
      await f.publish('pay-slow-record');
      await settled(f, 1);
      expect(await consumer.close()).toBe(true);

      // Assert: one run per allowed delivery, one letter, one report (before, with maxDeliveries 1: the
      // handler ran on deliveries 1, 2 and 3).
      const deliveries = Array.from({ length: maxDeliveries }, (_, i) => i + 1);
      expect(calls).toEqual(deliveries);
      const letters = await f.deadLetters();
      expect(letters.map((letter) => letter.header.get('x-idempotency-deliveries'))).toEqual([
        String(maxDeliveries),
      ]);
      expect(events).toEqual([...deliveries.slice(1).map(() => 'retry'), 'dead-letter']);
      expect((await f.jsm.consumers.info(f.stream, f.durable)).num_ack_pending).toBe(0);
    },
  );

  it('a DLQ publish whose PubAck is slow writes one letter', async () => {
    // Arrange: ack_wait 1 s; each dead letter's publish starts 2.5 s late.
    const f = await natsFixture('slow-publish', 1000);
    fixtures.push(f);
    const { publisher } = slowPublisher(f);
    const events: string[] = [];
    const { consumer, calls } = await failingConsumer(
      f,
      options(f, createIdempotency({ store: memoryStore() }), 1, events, publisher),
    );

    // Act
    await f.publish('pay-slow-publish');
    await settled(f, 1);
    expect(await consumer.close()).toBe(true);

    // Assert: before, the redeliveries wrote the recorded letter again (three letters in all).
    expect(calls).toEqual([1]);
    expect(await f.deadLetters()).toHaveLength(1);
    expect(events).toEqual(['dead-letter']);
  });

  it('a redelivery writing its recorded letter slowly writes it once', async () => {
    // Arrange: ack_wait 1 s; the first publish fails (the message is nak()ed, its letter recorded), the
    // next one, from the redelivery, starts 2.5 s late.
    const f = await natsFixture('slow-rewrite', 1000);
    fixtures.push(f);
    const { publisher, counted } = slowPublisher(f, 1);
    const events: string[] = [];
    const { consumer, calls } = await failingConsumer(
      f,
      options(f, createIdempotency({ store: memoryStore() }), 1, events, publisher),
    );

    // Act
    await f.publish('pay-slow-rewrite');
    await settled(f, 1);
    expect(await consumer.close()).toBe(true);

    // Assert: before, the redelivery writing the letter was not kept alive, and the server redelivered it
    // twice more meanwhile, each writing the letter (three letters, three reports).
    expect(calls).toEqual([1]);
    expect(counted.publishes).toBe(2);
    expect(await f.deadLetters()).toHaveLength(1);
    expect(events).toEqual(['dead-letter']);
  });

  describe('a working() after nak(delay), the reason it is never sent', () => {
    /** How long after `nak(3000)` and then `progress` (ack_wait 1 s) the message comes back. */
    const redeliveredAfter = async (
      label: string,
      progress: (message: JsMsg, f: NatsFixture) => void,
    ) => {
      const f = await natsFixture(label, 1000);
      fixtures.push(f);
      const consumer = await f.js.consumers.get(f.stream, f.durable);
      await f.publish(label);
      const first = await consumer.next({ expires: 5_000 });
      if (first === null) throw new Error('no message');
      const start = performance.now();
      first.nak(3_000);
      progress(first, f);
      const again = await consumer.next({ expires: 10_000 });
      again?.ack();
      return { ms: performance.now() - start, deliveryCount: again?.info.deliveryCount };
    };

    it('the server redelivers ack_wait after it, not after the delay', async () => {
      // Act: a +WPI sent as such (the client would drop it, see below), right after the nak.
      const { ms, deliveryCount } = await redeliveredAfter('nak-wpi', (message, f) =>
        // The client's message has its reply subject, though its type does not say so.
        f.nc.publish((message as JsMsg & { reply: string }).reply, '+WPI'),
      );
      // Assert: back after about 1 s (ack_wait), not 3 s.
      expect(deliveryCount).toBe(2);
      expect(ms).toBeLessThan(2_000);
    });

    it('the client sends none once the message was nak()ed', async () => {
      const { ms, deliveryCount } = await redeliveredAfter('nak-working', (message) =>
        message.working(),
      );
      expect(deliveryCount).toBe(2);
      expect(ms).toBeGreaterThanOrEqual(2_900);
    });
  });
});
