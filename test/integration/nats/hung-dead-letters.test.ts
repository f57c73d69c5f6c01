/**
 * Settle calls of the NATS consumer that never answer, against a real NATS server. `ack()`, `nak()` and
 * `term()` are sent without a reply, so they cannot hang; the dead letter's publish awaits a PubAck, and
 * does hang for as long as the publisher's own request timeout (`jetstream(nc, { timeout })`, 5 s by
 * default) when its link stops answering. With a long one, each such dead letter used to hold its
 * handler slot that long: with `concurrency: 2` and two hung publishes, no later message ran. Now each is
 * waited for at most `brokerTimeout` (default: `storeTimeout`, here the lease, 1 s), reported to
 * `onBrokerError`, and its slot freed; the message is not terminated, and its redelivery finds the letter
 * recorded and writes it, never running the handler.
 */
import { jetstream } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, describe, expect, it } from 'vitest';
import { createIdempotency, memoryStore } from '../../../src/index.js';
import { idempotentConsumer } from '../../../src/nats/index.js';
import type { TcpProxy } from '../../helpers/tcp-proxy.js';
import { type NatsFixture, natsFixture, proxiedConnection, until } from './setup.js';

describe('NATS consumer: dead letters whose publish never answers', () => {
  const fixtures: NatsFixture[] = [];
  const proxies: TcpProxy[] = [];
  const connections: NatsConnection[] = [];

  afterAll(async () => {
    for (const connection of connections) await connection.close().catch(() => {});
    for (const proxy of proxies) await proxy.close();
    for (const f of fixtures) await f.destroy();
  });

  it('frees the slots of dead letters whose PubAck never comes; the redelivery writes the recorded letter', async () => {
    // Arrange: dead letters published through a link cut below, with a minute's request timeout.
    const f = await natsFixture('hung-dlq', 1500);
    fixtures.push(f);
    const { proxy, connection: proxied } = await proxiedConnection();
    proxies.push(proxy);
    connections.push(proxied);
    const calls: string[] = [];
    const executed: Array<string | undefined> = [];
    const deadLetters: Array<string | undefined> = [];
    const brokerErrors: Array<{ key: string | undefined; operation: string }> = [];
    const engine = createIdempotency({ store: memoryStore() });
    const consumer = await idempotentConsumer(
      await f.js.consumers.get(f.stream, f.durable),
      (_message, context) => {
        calls.push(context.key);
        if (context.key.startsWith('fail-')) throw new Error('boom');
      },
      {
        name: f.stream,
        idempotency: engine,
        lease: '1s',
        concurrency: 2,
        maxDeliveries: 1,
        drainTimeout: '5s',
        publisher: jetstream(proxied, { timeout: 60_000 }),
        deadLetterSubject: f.dlq,
        hooks: {
          onExecuted: (event) => void executed.push(event.key),
          onDeadLetter: (event) => void deadLetters.push(event.key),
          onBrokerError: (event) => void brokerErrors.push(event),
        },
      },
    );
    proxy.cut();
    await f.publish('fail-1');
    await f.publish('fail-2');
    await until('both handlers to run', () => calls.length === 2);

    // Act
    await f.publish('after-1');
    await f.publish('after-2');

    // Assert: before, the two later messages waited for a slot until the publishes timed out (60 s).
    await until('the later messages to run', () => executed.length === 2, 10_000);
    // Both may run in the first slot freed, before the second letter is given up on.
    const isFailed = (event: { key: string | undefined }) =>
      event.key?.startsWith('fail-') === true;
    await until(
      'both letters given up on',
      () => brokerErrors.filter(isFailed).length >= 2,
      10_000,
    );
    const given = brokerErrors.filter(isFailed);
    expect(given.map((event) => event.operation)).toEqual(['dead_letter', 'dead_letter']);
    expect(deadLetters).toEqual([]);
    // The two publishes given up on still await their PubAck: close() waits for them up to
    // drainTimeout, and says they did not settle.
    expect(await consumer.close()).toBe(false);
    expect(await f.deadLetters()).toHaveLength(0);

    // Not terminated: JetStream redelivers both after AckWait, to a consumer publishing on a working
    // link. Each redelivery finds its letter recorded (before the hung write) and writes it, once,
    // without running the handler.
    const after: Array<string | undefined> = [];
    const takeover = await idempotentConsumer(
      await f.js.consumers.get(f.stream, f.durable),
      (_message, context) => void calls.push(context.key),
      {
        name: f.stream,
        idempotency: engine,
        maxDeliveries: 1,
        publisher: f.js,
        deadLetterSubject: f.dlq,
        hooks: { onDeadLetter: (event) => void after.push(event.key) },
      },
    );
    await until('both letters to be written', () => after.length === 2, 10_000);
    await takeover.close();
    expect(after.sort()).toEqual(['fail-1', 'fail-2']);
    expect(await f.deadLetters()).toHaveLength(2);
    expect(calls.filter((key) => key.startsWith('fail-'))).toHaveLength(2);
  });
});
