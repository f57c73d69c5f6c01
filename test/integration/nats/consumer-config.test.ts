/**
 * The NATS consumer against the JetStream consumer's own configuration. Before, it was never checked:
 * - `max_batch` or `max_expires` below what a pull asks for: the server refused every pull (409), and the
 *   consumer took no message, ever, only reporting `fetch` errors once a second;
 * - `ack_policy` `all` or `none` (an ordered consumer): a failed message was never redelivered (an ack of
 *   the next one settled it, or its `nak()` did nothing), so lost in silence;
 * - `max_deliver` below `maxDeliveries`: the server stopped redelivering a failing message before it was
 *   dead-lettered, and it was dropped unreported;
 * - a `workingInterval` not shorter than `ack_wait`: the server redelivered a message while its handler ran,
 *   each copy counting toward `maxDeliveries` (with 3, a failing handler was dead-lettered after 2 runs).
 *
 * And a consumer with a `backoff` schedule. The server then sets `ack_wait` to `backoff[0]`, but measures
 * delivery `n`'s time against `backoff[n-1]` (the last entry past the end): after a `working()`, and after
 * a `nak(delay)`, which it backdates by `ack_wait` only.
 * - A retry's `nak(delay)` came back `backoff[n-1] - ack_wait` late: with `backoff` [1 s, 4 s], a handler
 *   error retried after 3.5 s on the second delivery came back after 6.5 s. Now the delay sent is
 *   shortened by that much, and the retry comes when asked.
 * - An entry shorter than `backoff[0]`: `working()`, every third of `ack_wait`, came too late for that
 *   delivery, and the server redelivered the message while its handler ran. Now the default interval is a
 *   third of the shortest window, and a `workingInterval` not shorter than it is refused.
 * - A window of 100 ms (a backoff starting at 100 ms, so `ack_wait` 100 ms): the default interval had a
 *   floor of 100 ms, the whole window, and the server redelivered a 600 ms run. Now it has none.
 */
import { AckPolicy, type ConsumerConfig, DeliverPolicy } from '@nats-io/jetstream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIdempotency, InvalidOptionsError, memoryStore } from '../../../src/index.js';
import { idempotentConsumer } from '../../../src/nats/index.js';
import { type NatsFixture, natsFixture, until } from './setup.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const SECOND = 1_000_000_000;

describe('NATS consumer: the JetStream consumer configuration', () => {
  let f: NatsFixture;

  beforeAll(async () => {
    f = await natsFixture('config', 1000);
  });

  afterAll(async () => {
    await f?.destroy();
  });

  /** A pull consumer of its own on the fixture's subject, for messages published from now on. */
  async function consumerWith(name: string, config: Partial<ConsumerConfig>) {
    await f.jsm.consumers.add(f.stream, {
      durable_name: name,
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.New,
      filter_subject: f.subject,
      max_deliver: -1,
      ...config,
    });
    return f.js.consumers.get(f.stream, name);
  }

  it.each([
    ['max_batch', { max_batch: 2 }],
    ['max_expires', { max_expires: 2_000_000_000 }],
  ])('takes every message from a consumer with a %s below its pull', async (label, config) => {
    // Arrange: 8 slots ask for 18 messages at once (and wait 30 s); this consumer allows less.
    const consumer = await consumerWith(`limits-${label}`, config);
    const done: string[] = [];
    const fetchErrors: unknown[] = [];
    const running = await idempotentConsumer(
      consumer,
      (message) => {
        done.push(message.headers?.get('Nats-Msg-Id') ?? '');
      },
      {
        name: `${f.stream}-${label}`,
        idempotency: createIdempotency({ store: memoryStore() }),
        concurrency: 8,
        hooks: { onConsumerError: (event) => fetchErrors.push(event.error) },
      },
    );
    // Act
    for (let i = 0; i < 6; i++) await f.publish(`${label}-${i}`);
    // Assert
    await until('every message handled', () => done.length === 6, 4000).finally(() =>
      running.close(),
    );
    expect(done.sort()).toEqual([0, 1, 2, 3, 4, 5].map((i) => `${label}-${i}`));
    expect(fetchErrors).toEqual([]);
  });

  it.each([
    ['all', AckPolicy.All],
    ['none', AckPolicy.None],
  ])('refuses a consumer with ack_policy %s', async (label, policy) => {
    // Arrange
    const consumer = await consumerWith(`ack-${label}`, { ack_policy: policy });
    // Act
    const started = idempotentConsumer(consumer, () => {}, {
      name: `${f.stream}-ack-${label}`,
      idempotency: createIdempotency({ store: memoryStore() }),
    });
    // Assert
    await expect(started).rejects.toThrow(InvalidOptionsError);
    await expect(started).rejects.toThrow(`ack_policy '${label}': it needs 'explicit'`);
  });

  it('refuses an ordered consumer (ack_policy none)', async () => {
    // Arrange: `get` without a consumer name makes an ordered consumer.
    const consumer = await f.js.consumers.get(f.stream);
    // Act
    const started = idempotentConsumer(consumer, () => {}, {
      name: `${f.stream}-ordered`,
      idempotency: createIdempotency({ store: memoryStore() }),
    });
    // Assert
    await expect(started).rejects.toThrow("ack_policy 'none': it needs 'explicit'");
  });

  it('refuses a max_deliver below maxDeliveries', async () => {
    // Arrange
    const consumer = await consumerWith('max-deliver-low', { max_deliver: 2 });
    // Act
    const started = idempotentConsumer(consumer, () => {}, {
      name: `${f.stream}-max-deliver-low`,
      idempotency: createIdempotency({ store: memoryStore() }),
      maxDeliveries: 3,
    });
    // Assert
    await expect(started).rejects.toThrow(
      'the JetStream consumer has max_deliver 2, below maxDeliveries (3)',
    );
  });

  it('dead-letters a failing message on the last delivery max_deliver allows, when it equals maxDeliveries', async () => {
    // Arrange
    const consumer = await consumerWith('max-deliver-equal', { max_deliver: 3 });
    const runs: number[] = [];
    const letters: number[] = [];
    const running = await idempotentConsumer(
      consumer,
      (message) => {
        runs.push(message.info.deliveryCount);
        throw new Error('always fails');
      },
      {
        name: `${f.stream}-max-deliver-equal`,
        idempotency: createIdempotency({ store: memoryStore() }),
        maxDeliveries: 3,
        backoff: { initial: '50ms', max: '50ms' },
        publisher: f.js,
        deadLetterSubject: f.dlq,
        hooks: { onDeadLetter: (event) => letters.push(event.deliveryCount) },
      },
    );
    // Act
    await f.publish('poison');
    // Assert
    await until('the dead letter', () => letters.length === 1, 4000).finally(() => running.close());
    expect(runs).toEqual([1, 2, 3]);
    expect(letters).toEqual([3]);
  });

  it.each([
    ['no filter', undefined],
    ['a wildcard filter', '*'],
  ])('refuses a deadLetterSubject its own consumer takes back (%s)', async (label, wildcard) => {
    // Arrange: the dead-letter subject is on the consumer's stream, and the consumer takes it. Before, each
    // letter came back as a new message under the same key, and the handler ran again without end.
    const prefix = f.subject.slice(0, f.subject.lastIndexOf('.'));
    const consumer = await consumerWith(`own-dlq-${wildcard === undefined ? 'all' : 'star'}`, {
      filter_subject: wildcard === undefined ? undefined : `${prefix}.${wildcard}`,
    });
    // Act
    const started = idempotentConsumer(
      consumer,
      () => {
        throw new Error('always fails');
      },
      {
        name: `${f.stream}-own-dlq`,
        idempotency: createIdempotency({ store: memoryStore() }),
        maxDeliveries: 1,
        publisher: f.js,
        deadLetterSubject: f.dlq,
      },
    );
    // Assert
    await expect(started).rejects.toThrow(
      `deadLetterSubject: '${f.dlq}' is captured by stream '${f.stream}' and taken by this JetStream consumer (${label === 'no filter' ? 'no filter' : `filter ${prefix}.*`})`,
    );
  });

  it('holds a redelivery asked for on the last delivery max_deliver allows, and reports it if close() ends the hold', async () => {
    // Arrange: the key is held by a handler that runs on; its copy, in progress elsewhere, is nak()ed on
    // each delivery, up to the third and last, where a nak() would have the server drop it. Before, it was
    // sent and reported; now the copy is held here (last-delivery.test.ts), and only close() gives it
    // back, reported as before (the server drops it then).
    const consumer = await consumerWith('max-deliver-retry', { max_deliver: 3 });
    let release = () => {};
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    const errors: Array<{ operation: string; deliveryCount: number; error: unknown }> = [];
    const retries: number[] = [];
    const running = await idempotentConsumer(
      consumer,
      async (message) => {
        if (message.headers?.get('Nats-Msg-Id') === 'holder') await held;
      },
      {
        name: `${f.stream}-max-deliver-retry`,
        key: (message) => new TextDecoder().decode(message.data),
        idempotency: createIdempotency({ store: memoryStore() }),
        concurrency: 2,
        maxDeliveries: 3,
        minRetryDelay: '50ms',
        drainTimeout: '200ms',
        hooks: {
          onRetry: ({ deliveryCount }) => void retries.push(deliveryCount),
          onBrokerError: ({ operation, deliveryCount, error }) =>
            errors.push({ operation, deliveryCount, error }),
        },
      },
    );
    // Act
    await f.publish('holder', 'same-key');
    await f.publish('copy', 'same-key');
    await until('the retry on the last delivery', () => retries.includes(3), 4000);
    await sleep(300);
    const heldErrors = errors.length;
    const closing = running.close();
    // Assert
    await until('the report', () => errors.length === 1, 4000).finally(() => {
      release();
      return closing;
    });
    expect(heldErrors).toBe(0);
    expect(errors[0]?.operation).toBe('retry');
    expect(errors[0]?.deliveryCount).toBe(3);
    expect(errors[0]?.error).toMatchObject({
      name: 'MaxDeliverReachedError',
      message: expect.stringContaining('max_deliver (3) is reached'),
    });
  });

  it('refuses a workingInterval not shorter than ack_wait', async () => {
    // Arrange: the fixture's consumers have an ack_wait of 1 s.
    const consumer = await consumerWith('working-long', { ack_wait: 1_000_000_000 });
    // Act
    const started = idempotentConsumer(consumer, () => {}, {
      name: `${f.stream}-working-long`,
      idempotency: createIdempotency({ store: memoryStore() }),
      workingInterval: '1s',
    });
    // Assert
    await expect(started).rejects.toThrow(
      "workingInterval: 1000 ms is not shorter than the JetStream consumer's ack_wait (1000 ms)",
    );
  });

  it('retries after the delay asked for, not the backoff entry past ack_wait later', async () => {
    // Arrange: the handler fails on its first two runs, each retried after 3.5 s; the second delivery's
    // backoff entry is 3 s past ack_wait.
    const consumer = await consumerWith('retry-delay', {
      backoff: [1 * SECOND, 4 * SECOND],
      max_deliver: 10,
    });
    const runs: number[] = [];
    const running = await idempotentConsumer(
      consumer,
      () => {
        runs.push(performance.now());
        if (runs.length < 3) throw new Error('declined');
      },
      {
        name: `${f.stream}-retry-delay`,
        idempotency: createIdempotency({ store: memoryStore() }),
        maxDeliveries: 5,
        backoff: () => 3500,
      },
    );
    // Act
    await f.publish('retry-delay-1');
    // Assert: the retry of the second delivery came 3.5 s after it; before, 6.5 s (3.5 s + 4 s - 1 s).
    await until('the third run', () => runs.length === 3, 15_000).finally(() => running.close());
    const [first, second, third] = runs as [number, number, number];
    expect(second - first).toBeGreaterThanOrEqual(3400);
    expect(second - first).toBeLessThan(5000);
    expect(third - second).toBeGreaterThanOrEqual(3400);
    expect(third - second).toBeLessThan(5000);
  });

  it.each([
    // ack_wait 6 s (backoff[0]), but the second delivery's window is 1 s: the first run fails at once,
    // the second runs 2.5 s. Before, the server redelivered it five times more meanwhile.
    ['an entry shorter than ack_wait', 'short-entry', [6 * SECOND, 1 * SECOND], 1, 2500],
    // ack_wait 100 ms (backoff[0]), and a 600 ms run. Before, the 100 ms floor of the interval was the
    // whole window, and the server redelivered it once meanwhile.
    ['a first entry of 100 ms', 'entry-100ms', [SECOND / 10, 1 * SECOND], 0, 600],
  ])(
    'keeps a delivery alive while its handler runs, with %s',
    async (_label, name, backoff, failing, runMs) => {
      // Arrange
      const consumer = await consumerWith(name, { backoff, max_deliver: 10 });
      const deliveries: number[] = [];
      const running = await idempotentConsumer(
        consumer,
        async (message) => {
          deliveries.push(message.info.deliveryCount);
          if (deliveries.length <= failing) throw new Error('declined');
          await sleep(runMs);
        },
        {
          name: `${f.stream}-${name}`,
          idempotency: createIdempotency({ store: memoryStore() }),
          maxDeliveries: 5,
          backoff: () => 50,
        },
      );
      // Act
      await f.publish(`${name}-1`);
      await until('the last run', () => deliveries.length === failing + 1, 5000);
      await sleep(runMs + 500);
      await running.close();
      // Assert: no delivery beyond those the handler asked for.
      const info = await f.jsm.consumers.info(f.stream, name);
      const expected = Array.from({ length: failing + 1 }, (_, i) => i + 1);
      expect(deliveries).toEqual(expected);
      expect(info.delivered.consumer_seq).toBe(failing + 1);
      expect(info.num_ack_pending).toBe(0);
    },
  );

  it('refuses a workingInterval not shorter than the shortest backoff entry', async () => {
    // Arrange
    const consumer = await consumerWith('short-working', {
      backoff: [6 * SECOND, 1 * SECOND],
      max_deliver: 10,
    });
    // Act
    const started = idempotentConsumer(consumer, () => {}, {
      name: `${f.stream}-short-working`,
      idempotency: createIdempotency({ store: memoryStore() }),
      workingInterval: 2000,
    });
    // Assert
    await expect(started).rejects.toThrow(InvalidOptionsError);
    await expect(started).rejects.toThrow(/backoff/);
  });
});
