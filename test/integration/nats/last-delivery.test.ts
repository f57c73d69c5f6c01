/**
 * A retry asked for on the last delivery a JetStream consumer's finite `max_deliver` allows: the server
 * never makes it, and drops the message at that `nak()`. Before, it was sent all the same, then reported
 * (`MaxDeliverReachedError`): a healthy copy whose key was in progress elsewhere on every delivery (behind
 * a long holder, or a crashed one until its lease ran out) was dropped unrun, the effect lost if the
 * holder then failed; a message whose dead letter could not be written (a DLQ stream full, say) was dropped
 * with no letter. Now such a delivery is held here, kept alive with `working()`, and processed again after
 * the retry's delay; `close()` ends the hold, giving the message back (dropped, and reported) as before.
 *
 * And a message waiting for a handler slot on its last delivery: handed back (`nak()`) after nine touch
 * intervals behind stuck slots, it was dropped by the server, in silence. Now it waits for a slot.
 */
import { DiscardPolicy, jetstream } from '@nats-io/jetstream';
import { headers } from '@nats-io/transport-node';
import { afterAll, describe, expect, it } from 'vitest';
import { createIdempotency, memoryStore } from '../../../src/index.js';
import { idempotentConsumer } from '../../../src/nats/index.js';
import { type NatsFixture, natsFixture, until } from './setup.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Messages of the fixture's consumer not yet acked or terminated, once none is left or after 2 s: an ack
 * or a term is sent without a reply, and the server may answer an info request before it has applied one
 * (seen once in four runs with a term sent just before).
 */
async function unsettled(f: NatsFixture): Promise<number> {
  const deadline = Date.now() + 2000;
  for (;;) {
    const info = await f.jsm.consumers.info(f.stream, f.durable);
    const left = info.num_ack_pending + info.num_pending;
    if (left === 0 || Date.now() > deadline) return left;
    await sleep(50);
  }
}

describe('NATS consumer: a retry on the last delivery max_deliver allows', () => {
  const fixtures: NatsFixture[] = [];
  afterAll(async () => {
    for (const f of fixtures) await f.destroy();
  });

  /** A fixture whose consumer has `max_deliver` 3 and `ack_wait` 1 s. */
  async function fixture(label: string) {
    const f = await natsFixture(label, 1000, 3);
    fixtures.push(f);
    return f;
  }

  /** Publish `body` (the key) with `Nats-Msg-Id: id`. */
  async function publish(f: NatsFixture, id: string, body: string) {
    const sent = headers();
    sent.set('Nats-Msg-Id', id);
    await f.js.publish(f.subject, new TextEncoder().encode(body), { headers: sent });
  }

  it('runs a copy whose key was in progress on every delivery, once the holder released it', async () => {
    // Arrange: the holder runs 2.5 s (past ack_wait, kept alive), then fails for good; its copy, under the
    // same key, meets it in progress on deliveries 1, 2 and 3, the server's last.
    const f = await fixture('last-in-progress');
    const runs: string[] = [];
    const errors: unknown[] = [];
    const deadLetters: string[] = [];
    const running = await idempotentConsumer(
      await f.js.consumers.get(f.stream, f.durable),
      async (message, context) => {
        const id = message.headers?.get('Nats-Msg-Id') ?? '';
        runs.push(`${id}#${context.deliveryCount}`);
        if (id !== 'holder') return;
        await sleep(2500);
        throw new Error('card declined');
      },
      {
        name: f.stream,
        key: (message) => new TextDecoder().decode(message.data),
        idempotency: createIdempotency({ store: memoryStore() }),
        concurrency: 2,
        maxDeliveries: 3,
        minRetryDelay: '100ms',
        maxRetryDelay: '300ms',
        isPermanentError: () => true,
        hooks: {
          onBrokerError: (event) => errors.push(event.error),
          onDeadLetter: (event) => deadLetters.push(event.reason),
        },
      },
    );
    // Act
    await publish(f, 'holder', 'pay-1');
    await sleep(100);
    await publish(f, 'copy', 'pay-1');
    // Assert: before, the copy was dropped at its third nak() and never ran.
    await until('the copy ran', () => runs.includes('copy#3'), 8000).finally(() => running.close());
    expect(runs).toEqual(['holder#1', 'copy#3']);
    // The holder's, terminated (no DLQ subject here).
    expect(deadLetters).toEqual(['handler_error']);
    expect(errors).toEqual([]);
    expect(await unsettled(f)).toBe(0);
  });

  it('claims a copy held behind a long holder less and less often, as redeliveries would', async () => {
    // Arrange: max_deliver 1; the holder runs 3 s, its copy (same key) is held meanwhile.
    const f = await natsFixture('last-in-progress-growing', 1000, 1);
    fixtures.push(f);
    const retries: number[] = [];
    const duplicates: string[] = [];
    const running = await idempotentConsumer(
      await f.js.consumers.get(f.stream, f.durable),
      async (message) => {
        if (message.headers?.get('Nats-Msg-Id') === 'holder') await sleep(3000);
      },
      {
        name: f.stream,
        key: (message) => new TextDecoder().decode(message.data),
        idempotency: createIdempotency({ store: memoryStore() }),
        concurrency: 2,
        maxDeliveries: 1,
        minRetryDelay: '100ms',
        maxRetryDelay: '10s',
        hooks: {
          onRetry: (event) => void retries.push(event.delayMs),
          onDuplicate: (event) =>
            void duplicates.push(event.message.headers?.get('Nats-Msg-Id') ?? ''),
        },
      },
    );
    // Act
    await publish(f, 'holder', 'pay-3');
    await sleep(100);
    await publish(f, 'copy', 'pay-3');
    await until('the copy settled', () => duplicates.includes('copy'), 10_000).finally(() =>
      running.close(),
    );
    // Assert: before, 100 ms each time, about 29 claims in the 2.9 s; now 100, 200, 400, 800, 1600 ms.
    expect(retries.length).toBeLessThanOrEqual(6);
    expect(retries.slice(0, 4)).toEqual([100, 200, 400, 800]);
    expect(await unsettled(f)).toBe(0);
  });

  it.each([
    [3, 'on a redelivery'],
    // On a first delivery no recorded letter is looked up: the held retry carries it.
    [1, 'on its first delivery'],
  ])(
    'writes the letter once the DLQ stream takes it, the message never dropped nor run again (max_deliver %i, %s)',
    async (maxDeliver) => {
      // Arrange: the DLQ subject is on a stream of its own, full (discard new): every letter is refused.
      const f = await natsFixture(`last-dlq-full-${maxDeliver}`, 1000, maxDeliver);
      fixtures.push(f);
      const dlqStream = `${f.stream}_DLQ`;
      const dlq = `${f.subject}.dlq`;
      await f.jsm.streams.add({
        name: dlqStream,
        subjects: [dlq],
        max_msgs: 1,
        discard: DiscardPolicy.New,
      });
      await f.js.publish(dlq, new Uint8Array(1));
      let runs = 0;
      const errors: Array<{ operation: string; error: Error }> = [];
      const deadLetters: number[] = [];
      const running = await idempotentConsumer(
        await f.js.consumers.get(f.stream, f.durable),
        () => {
          runs++;
          throw new Error('card declined');
        },
        {
          name: f.stream,
          idempotency: createIdempotency({ store: memoryStore() }),
          maxDeliveries: maxDeliver,
          backoff: () => 50,
          minRetryDelay: '50ms',
          maxRetryDelay: '200ms',
          publisher: f.js,
          deadLetterSubject: dlq,
          hooks: {
            onBrokerError: (event) =>
              errors.push({ operation: event.operation, error: event.error as Error }),
            onDeadLetter: (event) => deadLetters.push(event.deliveryCount),
          },
        },
      );
      try {
        // Act: the letter, decided on the last delivery, is refused three times; then the DLQ has room.
        await publish(f, 'pay-2', 'pay-2');
        await until('three refused letters', () => errors.length >= 3, 8000);
        await f.jsm.streams.purge(dlqStream);
        await until('the letter', () => deadLetters.length > 0, 8000);
        await sleep(300);
      } finally {
        await running.close();
        await f.jsm.streams.delete(dlqStream).catch(() => {});
      }
      // Assert: before, the server dropped the message at the first refused letter's nak(), unwritten.
      expect(runs).toBe(maxDeliver);
      expect(deadLetters).toEqual([maxDeliver]);
      expect(errors.map((e) => e.operation)).toEqual(errors.map(() => 'dead_letter'));
      expect(errors.map((e) => e.error.name)).not.toContain('MaxDeliverReachedError');
      expect(await unsettled(f)).toBe(0);
    },
  );

  it('waits past brokerTimeout for a letter on the last delivery, and writes it again if it then fails', async () => {
    // Arrange: max_deliver 1, brokerTimeout 500 ms; the DLQ subject is taken by a subscriber that never
    // answers (a stalled stream leader, say), so the first publish fails after the client's 1.5 s.
    const f = await natsFixture('last-late-letter', 1000, 1);
    fixtures.push(f);
    const dlq = `${f.subject}.late-dlq`;
    const hung = f.nc.subscribe(dlq, { callback: () => {} });
    const js = jetstream(f.nc, { timeout: 1500 });
    let runs = 0;
    const errors: Array<{ operation: string; message: string }> = [];
    const deadLetters: number[] = [];
    const running = await idempotentConsumer(
      await js.consumers.get(f.stream, f.durable),
      () => {
        runs++;
        throw new Error('card declined');
      },
      {
        name: f.stream,
        idempotency: createIdempotency({ store: memoryStore() }),
        maxDeliveries: 1,
        maxRetryDelay: '300ms',
        brokerTimeout: '500ms',
        publisher: js,
        deadLetterSubject: dlq,
        hooks: {
          onBrokerError: (event) =>
            errors.push({ operation: event.operation, message: (event.error as Error).message }),
          onDeadLetter: (event) => deadLetters.push(event.deliveryCount),
        },
      },
    );
    const dlqStream = `${f.stream}_LATE`;
    try {
      // Act: once the first publish failed, the DLQ subject gets a stream that answers.
      await f.publish('pay-4', 'pay-4');
      await until(
        'the failed publish',
        () => errors.some((e) => !/brokerTimeout/.test(e.message)),
        8000,
      );
      hung.unsubscribe();
      await f.jsm.streams.add({ name: dlqStream, subjects: [dlq] });
      await until('the letter', () => deadLetters.length > 0, 8000);
      // Assert: before, the write was given up on at 500 ms ("the broker redelivers it"), its failure at
      // 1.5 s went unreported, and the server dropped the message at its ack_wait with no letter. Now
      // it is said to be overdue at 500 ms (still waited for), and its failure is reported.
      expect(runs).toBe(1);
      expect(deadLetters).toEqual([1]);
      expect(errors.map((e) => e.operation)).toEqual(['dead_letter', 'dead_letter']);
      expect(errors[0]?.message).toMatch(/brokerTimeout\): it is still waited for/);
      expect(errors[1]?.message).not.toMatch(/brokerTimeout/);
      expect((await f.jsm.streams.info(dlqStream)).state.messages).toBe(1);
      expect(await unsettled(f)).toBe(0);
    } finally {
      hung.unsubscribe();
      await running.close();
      await f.jsm.streams.delete(dlqStream).catch(() => {});
    }
  });

  it('keeps a message waiting behind a busy slot on its last delivery until the slot frees', async () => {
    // Arrange: max_deliver 1, ack_wait 1 s: a message waiting nine touch intervals (3 s) is handed back.
    const f = await natsFixture('last-waiting', 1000, 1);
    fixtures.push(f);
    const runs: string[] = [];
    const running = await idempotentConsumer(
      await f.js.consumers.get(f.stream, f.durable),
      async (_message, context) => {
        runs.push(`${context.key}#${context.deliveryCount}`);
        if (context.key === 'm1') await sleep(4000);
      },
      {
        name: f.stream,
        idempotency: createIdempotency({ store: memoryStore() }),
        concurrency: 1,
        maxDeliveries: 1,
      },
    );
    // Act: m2 waits behind m1's 4 s run.
    await f.publish('m1');
    await f.publish('m2');
    // Assert: before, m2 was handed back after 3 s, and the server dropped it.
    await until('m2 ran', () => runs.includes('m2#1'), 8000).finally(() => running.close());
    expect(runs).toEqual(['m1#1', 'm2#1']);
    expect(await unsettled(f)).toBe(0);
  });

  it('reports a message close() hands back from the wait for a slot on its last delivery, unrecorded', async () => {
    // Arrange: max_deliver 1, one slot: m2 waits behind m1's 1.5 s run when close() comes.
    const f = await natsFixture('last-waiting-close', 1000, 1);
    fixtures.push(f);
    const store = memoryStore();
    const runs: string[] = [];
    const errors: Array<{ operation: string; key: string | undefined; name: string }> = [];
    const running = await idempotentConsumer(
      await f.js.consumers.get(f.stream, f.durable),
      async (_message, context) => {
        runs.push(`${context.key}#${context.deliveryCount}`);
        await sleep(1500);
      },
      {
        name: f.stream,
        idempotency: createIdempotency({ store }),
        concurrency: 1,
        maxDeliveries: 1,
        hooks: {
          onBrokerError: (event) =>
            errors.push({
              operation: event.operation,
              key: event.key,
              name: (event.error as Error).name,
            }),
        },
      },
    );
    await f.publish('m1');
    await f.publish('m2');
    await until('m1 ran', () => runs.length > 0, 5000);
    await sleep(300);
    // Act
    const closed = await running.close();
    // Assert: before, the server dropped m2 at close()'s nak() and nothing said so; and a record of the
    // hand-back was written, for a redelivery that never comes.
    expect(closed).toBe(true);
    expect(runs).toEqual(['m1#1']);
    expect(errors).toEqual([{ operation: 'retry', key: 'm2', name: 'MaxDeliverReachedError' }]);
    // m1's record only.
    expect(store.size).toBe(1);
    expect(await unsettled(f)).toBe(0);
  });
});
