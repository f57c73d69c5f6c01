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
import { DiscardPolicy } from '@nats-io/jetstream';
import { headers } from '@nats-io/transport-node';
import { afterAll, describe, expect, it } from 'vitest';
import { createIdempotency, memoryStore } from '../../../src/index.js';
import { idempotentConsumer } from '../../../src/nats/index.js';
import { type NatsFixture, natsFixture, until } from './setup.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

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
    const info = await f.jsm.consumers.info(f.stream, f.durable);
    expect(info.num_ack_pending + info.num_pending).toBe(0);
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
      const info = await f.jsm.consumers.info(f.stream, f.durable);
      expect(info.num_ack_pending + info.num_pending).toBe(0);
    },
  );

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
    const info = await f.jsm.consumers.info(f.stream, f.durable);
    expect(info.num_ack_pending + info.num_pending).toBe(0);
  });
});
