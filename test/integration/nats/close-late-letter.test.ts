/**
 * `close()` and a dead letter given up on, against a real NATS server: the letter's publish goes through a
 * link that stalls (a TCP proxy holds every byte both ways), so its PubAck passes `brokerTimeout` and its
 * delivery settles, freeing its slot; but the publish goes on, and when the link recovers it lands, the
 * message is terminated and `onDeadLetter` fires. `close()` waits for it, within `drainTimeout`. (Before,
 * `close()` resolved `true` as soon as no slot was held, and the letter landed behind it unreported:
 * nothing told the application that the message was dead-lettered.)
 */
import { jetstream } from '@nats-io/jetstream';
import { describe, expect, it, onTestFinished } from 'vitest';
import { createIdempotency, memoryStore } from '../../../src/index.js';
import { idempotentConsumer } from '../../../src/nats/index.js';
import { closeThenRelease } from '../../helpers/close-hooks.js';
import { natsFixture, proxiedConnection, until } from './setup.js';

describe('NATS consumer: close() and a dead letter still being published', () => {
  it('resolves only once a dead letter given up on has landed and been reported', async () => {
    // Arrange: dead letters published through a proxy that the handler stalls, with a minute's request
    // timeout; the consumer's own connection (its acks and terms) is direct.
    const f = await natsFixture('close-late-letter');
    onTestFinished(() => f.destroy());
    const { proxy, connection: proxied } = await proxiedConnection();
    onTestFinished(async () => {
      await proxied.close().catch(() => {});
      await proxy.close();
    });
    const order: string[] = [];
    const consumer = await idempotentConsumer(
      await f.js.consumers.get(f.stream, f.durable),
      () => {
        proxy.pause();
        throw new Error('card declined');
      },
      {
        name: f.stream,
        idempotency: createIdempotency({ store: memoryStore() }),
        maxDeliveries: 1,
        brokerTimeout: '200ms',
        drainTimeout: '5s',
        publisher: jetstream(proxied, { timeout: 60_000 }),
        deadLetterSubject: f.dlq,
        hooks: {
          onBrokerError: (event) => void order.push(`given up: ${event.operation}`),
          onDeadLetter: () => void order.push('dead letter'),
        },
      },
    );
    await f.publish('pay-declined');
    await until('the letter to be given up on', () => order.length === 1, 10_000);

    // Act: close while the publish is held; the link recovers a little later, and the letter lands.
    const closed = await closeThenRelease(consumer, order, () => proxy.resume());

    // Assert
    expect(closed).toBe(true);
    expect(order).toEqual(['given up: dead_letter', 'dead letter', 'closed']);
    expect(await f.deadLetters()).toHaveLength(1);
  });
});
