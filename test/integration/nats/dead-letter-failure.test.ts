/**
 * Dead letters of the NATS consumer. A dead-lettered message is terminated for good: `term(reason)` sends
 * `+TERM <reason>`, which servers before 2.10.4 do not read as a term at all (the message stayed pending
 * and came back after every AckWait, running its handler again and writing one more dead letter each
 * time), so the consumer gives a reason only to servers that take one.
 *
 * A dead letter the NATS consumer cannot write (its DLQ subject captured by no stream: the publish gets no
 * PubAck): the message is kept for a later try, and that redelivery, past `maxDeliveries`, must write the
 * dead letter again without running the handler, however long the DLQ stays broken. Once it works, the
 * letter written is the one decided on, with the handler's error.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { createIdempotency, memoryStore } from '../../../src/index.js';
import { idempotentConsumer } from '../../../src/nats/index.js';
import { type NatsFixture, natsFixture, until } from './setup.js';

describe('NATS consumer: dead letters', () => {
  const fixtures: NatsFixture[] = [];
  const streams: string[] = [];

  afterAll(async () => {
    for (const name of streams) await fixtures[0]?.jsm.streams.delete(name).catch(() => {});
    for (const f of fixtures) await f.destroy();
  });

  it('never runs the handler past maxDeliveries, and writes the letter once the DLQ works', async () => {
    // Arrange: two deliveries allowed, short delays, a DLQ subject no stream captures yet.
    const f = await natsFixture('dlq-fails');
    fixtures.push(f);
    const dlqStream = `${f.stream}_DLQ`;
    streams.push(dlqStream);
    const deadLetterSubject = `${f.dlq}.unstored`;
    let runs = 0;
    const failedWrites: number[] = [];
    const deadLetters: number[] = [];
    const running = await idempotentConsumer(
      await f.js.consumers.get(f.stream, f.durable),
      () => {
        runs++;
        throw new Error(`payment gateway down (run ${runs})`);
      },
      {
        name: f.stream,
        idempotency: createIdempotency({ store: memoryStore() }),
        maxDeliveries: 2,
        backoff: () => 50,
        minRetryDelay: '50ms',
        maxRetryDelay: '100ms',
        publisher: f.js,
        deadLetterSubject,
        hooks: {
          onBrokerError: (event) => {
            if (event.operation === 'dead_letter') failedWrites.push(event.deliveryCount);
          },
          onDeadLetter: (event) => deadLetters.push(event.deliveryCount),
        },
      },
    );
    // Act: the DLQ fails on delivery 2 and on three redeliveries past it.
    await f.publish('p1');
    await until('three redeliveries past the limit', () => failedWrites.length >= 4, 10_000);
    const runsWhileBroken = runs;
    await f.jsm.streams.add({ name: dlqStream, subjects: [deadLetterSubject] });
    await until('the dead letter', () => deadLetters.length === 1, 10_000);
    await running.close();
    // Assert
    expect(runsWhileBroken).toBe(2);
    expect(runs).toBe(2);
    expect(Math.max(...failedWrites)).toBeGreaterThan(2);
    const letter = await f.jsm.streams.getMessage(dlqStream, { last_by_subj: deadLetterSubject });
    expect(letter?.header.get('Nats-Msg-Id')).toBe('');
    expect(letter?.header.get('x-idempotency-key')).toBe('p1');
    expect(letter?.header.get('x-idempotency-deliveries')).toBe('2');
    expect(JSON.parse(letter?.header.get('x-idempotency-error') ?? '{}').message).toBe(
      'payment gateway down (run 2)',
    );
    // Termed after the write (term() is not awaited by the server's reply): nothing left pending.
    let pending = -1;
    for (let i = 0; i < 50 && pending !== 0; i++) {
      pending = (await f.jsm.consumers.info(f.stream, f.durable)).num_ack_pending;
      if (pending !== 0) await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(pending).toBe(0);
  });

  it('never delivers a dead-lettered message again, whatever the server version', async () => {
    // Arrange: one delivery allowed, a handler that always fails, an AckWait of 1 s.
    const f = await natsFixture('term', 1000);
    fixtures.push(f);
    const deliveries: number[] = [];
    const running = await idempotentConsumer(
      await f.js.consumers.get(f.stream, f.durable),
      (_message, context) => {
        deliveries.push(context.deliveryCount);
        throw new Error('card declined');
      },
      {
        name: f.stream,
        idempotency: createIdempotency({ store: memoryStore() }),
        maxDeliveries: 1,
        publisher: f.js,
        deadLetterSubject: f.dlq,
      },
    );
    // Act: publish, then wait past two AckWaits.
    await f.publish('t1');
    await until('the dead letter', () => deliveries.length === 1);
    await new Promise((resolve) => setTimeout(resolve, 2500));
    await running.close();
    // Assert
    expect(deliveries).toEqual([1]);
    expect(await f.deadLetters()).toHaveLength(1);
    expect((await f.jsm.consumers.info(f.stream, f.durable)).num_ack_pending).toBe(0);
  });
});
