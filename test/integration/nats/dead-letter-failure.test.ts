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
import { jetstream } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { afterAll, describe, expect, it } from 'vitest';
import { createIdempotency, memoryStore } from '../../../src/index.js';
import { idempotentConsumer } from '../../../src/nats/index.js';
import { env } from '../../helpers/env.js';
import { startTcpProxy } from '../../helpers/tcp-proxy.js';
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

  it('writes the letter again, and never runs the handler, when the term after a written letter is lost', async () => {
    // Arrange: consumer A reads through a TCP proxy, B directly, one store, one delivery allowed; the
    // letters are published on the fixture's own connection, so they reach the DLQ whatever A's link.
    const f = await natsFixture('term-lost', 1000);
    fixtures.push(f);
    const url = new URL(env.natsUrl);
    const proxy = await startTcpProxy({ host: url.hostname, port: Number(url.port || 4222) });
    const proxied = await connect({ servers: `127.0.0.1:${proxy.port}`, reconnect: false });
    try {
      const store = memoryStore();
      const runs: string[] = [];
      const letters: string[] = [];
      const options = (label: string) => ({
        name: f.stream,
        idempotency: createIdempotency({ store }),
        maxDeliveries: 1,
        publisher: f.js,
        deadLetterSubject: f.dlq,
        drainTimeout: '100ms' as const,
        hooks: { onDeadLetter: () => void letters.push(label) },
      });
      const handler = (label: string) => () => {
        runs.push(label);
        // A's link breaks while its handler runs: the letter still reaches the DLQ, its term() does not.
        if (label === 'A') proxy.cut();
        throw new Error('card declined');
      };
      const a = await idempotentConsumer(
        await jetstream(proxied).consumers.get(f.stream, f.durable),
        handler('A'),
        options('A'),
      );
      await f.publish('d1');
      await until('the letter written by A', () => letters.length === 1);
      await new Promise((resolve) => setTimeout(resolve, 100));
      proxy.drop(); // the server forgets A's pulls: its redelivery goes to B
      const b = await idempotentConsumer(
        await f.js.consumers.get(f.stream, f.durable),
        handler('B'),
        options('B'),
      );
      // Act: after AckWait, the server redelivers the message whose term it never got.
      await until('the redelivery to settle in B', () => letters.length === 2, 10_000);
      await b.close();
      await a.close();
      // Assert: B wrote the recorded letter again (at least once) instead of running the handler.
      expect(runs).toEqual(['A']);
      expect(letters).toEqual(['A', 'B']);
      const written = await f.deadLetters();
      expect(written.map((letter) => letter.header.get('x-idempotency-deliveries'))).toEqual([
        '1',
        '1',
      ]);
      expect((await f.jsm.consumers.info(f.stream, f.durable)).num_ack_pending).toBe(0);
    } finally {
      await proxied.close().catch(() => {});
      await proxy.close();
    }
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
