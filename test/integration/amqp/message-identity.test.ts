/**
 * What the RabbitMQ consumer reads from a message to know it: its key, and how many times it was
 * delivered. Both come from values a producer, a shovel or a forwarding service set, not only from this
 * adapter, and must never merge two messages into one key nor count deliveries that never happened.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AmqpMessage } from '../../../src/amqp/index.js';
import { memoryStore } from '../../../src/index.js';
import { AmqpQueues, waitUntil } from '../../helpers/amqp-queues.js';
import { env, requireService } from '../../helpers/env.js';

describe('amqp consumer: the identity of a message', () => {
  const queues = new AmqpQueues();

  beforeAll(async () => {
    await requireService('RabbitMQ', env.amqpUrl);
    await queues.open();
  });
  afterAll(() => queues.close());

  it('dead-letters a message without a key, saying so, and goes on with the next one (prefetch 1)', async () => {
    // Arrange (holds; not tested on RabbitMQ before)
    const queue = await queues.queue('keyless');
    const runs: string[] = [];
    await queues.start((message: AmqpMessage) => void runs.push(message.content.toString()), {
      queue,
      name: queue,
      idempotency: { store: memoryStore() },
      prefetch: 1,
    });
    // Act
    await queues.publish(queue, 'pay, no key', {});
    await queues.publish(queue, 'pay, keyed', { messageId: 'keyed-1' });
    await waitUntil('the keyed message to run', () => runs.length === 1);
    await waitUntil('the dead letter', async () => (await queues.count(`${queue}.dlq`)) === 1);
    // Assert
    expect(runs).toEqual(['pay, keyed']);
    const [letter] = await queues.drain(`${queue}.dlq`);
    expect(letter?.content.toString()).toBe('pay, no key');
    expect(letter?.properties.headers?.['x-idempotency-dead-letter-reason']).toBe('invalid_key');
    expect(String(letter?.properties.headers?.['x-idempotency-error'])).toMatch(
      /no idempotency key/,
    );
  });

  it('dead-letters a message whose x-idempotency-key header is not text, rather than merge it with another', async () => {
    // Arrange: two different payments whose producer put the key in a typed header (pika sends a Python
    // datetime as an AMQP timestamp, a dict as a table). String() made "[object Object]" of both.
    const queue = await queues.queue('typed-key');
    const runs: string[] = [];
    const settled: string[] = [];
    await queues.start((message: AmqpMessage) => void runs.push(message.content.toString()), {
      queue,
      name: queue,
      idempotency: { store: memoryStore() },
      hooks: {
        onExecuted: () => void settled.push('executed'),
        onDuplicate: () => void settled.push('duplicate'),
        onDeadLetter: (event) => void settled.push(`dead letter: ${event.reason}`),
      },
    });
    // Act
    await queues.publish(queue, 'pay 10 EUR to A', {
      headers: { 'x-idempotency-key': { '!': 'timestamp', value: 1_700_000_000 } },
    });
    await queues.publish(queue, 'pay 99 EUR to B', {
      headers: { 'x-idempotency-key': { order: 'o-2' } },
    });
    await waitUntil('both messages to settle', () => settled.length === 2);
    // Assert: neither runs under a key it shares with another message; both are kept, with the reason.
    expect(runs).toEqual([]);
    expect(settled).toEqual(['dead letter: invalid_key', 'dead letter: invalid_key']);
    const letters = new Map(
      (await queues.drain(`${queue}.dlq`)).map((letter) => [
        letter.content.toString(),
        String(letter.properties.headers?.['x-idempotency-error']),
      ]),
    );
    expect([...letters.keys()].sort()).toEqual(['pay 10 EUR to A', 'pay 99 EUR to B']);
    expect(letters.get('pay 10 EUR to A')).toMatch(
      /x-idempotency-key header is an AMQP timestamp, not text/,
    );
    expect(letters.get('pay 99 EUR to B')).toMatch(
      /x-idempotency-key header is an AMQP table, not text/,
    );
  });

  it('dead-letters a message whose x-idempotency-key header is a 64-bit integer amqplib cannot read exactly', async () => {
    // Arrange: two orders keyed by their 64-bit ids (a Java producer's `long`, a snowflake id). amqplib
    // reads an AMQP long into a JavaScript number, exact only up to 2^53: both became 1234567890123456800.
    const queue = await queues.queue('long-key');
    const runs: string[] = [];
    const settled: string[] = [];
    await queues.start((message: AmqpMessage) => void runs.push(message.content.toString()), {
      queue,
      name: queue,
      idempotency: { store: memoryStore() },
      hooks: {
        onExecuted: () => void settled.push('executed'),
        onDuplicate: () => void settled.push('duplicate'),
        onDeadLetter: (event) => void settled.push(`dead letter: ${event.reason}`),
      },
    });
    // Act
    for (const id of ['1234567890123456789', '1234567890123456790']) {
      await queues.publish(queue, `ship order ${id}`, {
        headers: { 'x-idempotency-key': { '!': 'int64', value: id } },
      });
    }
    await queues.publish(queue, 'ship order 42', { headers: { 'x-idempotency-key': 42 } });
    await waitUntil('the three messages to settle', () => settled.length === 3);
    // Assert: the small integer is a key as before; the two longs are kept, never merged.
    expect(runs).toEqual(['ship order 42']);
    // Sorted: an ack is written sooner than a dead letter is confirmed.
    expect(settled.sort()).toEqual([
      'dead letter: invalid_key',
      'dead letter: invalid_key',
      'executed',
    ]);
    const letters = await queues.drain(`${queue}.dlq`);
    expect(String(letters[0]?.properties.headers?.['x-idempotency-error'])).toMatch(
      /x-idempotency-key header is the number 1234567890123456800, beyond 2\^53/,
    );
  });

  for (const type of ['classic', 'quorum'] as const) {
    it(`counts a first delivery as the first on a ${type} queue, whatever x-delivery-count it carries`, async () => {
      // Arrange: a message forwarded from a quorum queue after a redelivery there (a shovel, the management
      // UI's "move messages", a service that re-publishes what it consumed) carries that queue's
      // `x-delivery-count`; RabbitMQ leaves it as it is on a first delivery, of a quorum queue too.
      const queue = await queues.queue(`forwarded-${type}`);
      if (type === 'quorum') {
        await queues.channel.deleteQueue(queue);
        await queues.channel.assertQueue(queue, {
          durable: true,
          arguments: { 'x-queue-type': 'quorum' },
        });
      }
      const counts: number[] = [];
      await queues.start(
        (_message, context) => {
          counts.push(context.deliveryCount);
          throw new Error('card declined');
        },
        {
          queue,
          name: queue,
          idempotency: { store: memoryStore() },
          maxDeliveries: 3,
          backoff: { initial: 20, jitter: false },
        },
      );
      // Act
      await queues.publish(queue, 'pay', {
        messageId: `forwarded-${type}`,
        headers: { 'x-delivery-count': 7 },
      });
      await waitUntil('the dead letter', async () => (await queues.count(`${queue}.dlq`)) === 1);
      // Assert: its full maxDeliveries here, counted from 1 (before: one run, counted 8, then dead).
      expect(counts).toEqual([1, 2, 3]);
      const [letter] = await queues.drain(`${queue}.dlq`);
      expect(letter?.properties.headers?.['x-idempotency-dead-letter-deliveries']).toBe(3);
    });
  }
});
