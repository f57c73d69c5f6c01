/**
 * A message whose own headers nearly fill amqplib's 64 KB header table (RabbitMQ takes up to its frame
 * size) is still dead-lettered: its dead letter leaves its largest headers out, naming them, rather than
 * failing to encode, after which the retry copy carrying the letter failed the same way and the message
 * stayed unacked on the channel, holding a prefetch slot, never dead-lettered.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { memoryStore } from '../../../src/index.js';
import { AmqpQueues, waitUntil } from '../../helpers/amqp-queues.js';
import { env, requireService } from '../../helpers/env.js';

describe('amqp consumer: a message with headers near 64 KB', () => {
  const queues = new AmqpQueues();

  beforeAll(async () => {
    await requireService('RabbitMQ', env.amqpUrl);
    await queues.open();
  });
  afterAll(() => queues.close());

  it.each([
    {
      reason: 'handler_error',
      headers: { 'x-idempotency-key': 'k-1' },
      handler: () => {
        throw new Error('declined');
      },
    },
    // An AMQP table is no key: dead-lettered without running.
    { reason: 'invalid_key', headers: { 'x-idempotency-key': { a: 1 } }, handler: () => {} },
  ])(
    'dead-letters it ($reason) with its largest header left out and named, and acks it',
    async ({ reason, headers, handler }) => {
      // Arrange
      const queue = await queues.queue(`huge-${reason}`);
      const brokerErrors: unknown[] = [];
      const deadLetters: string[] = [];
      const consumer = await queues.start(handler, {
        queue,
        name: queue,
        maxDeliveries: 1,
        idempotency: { store: memoryStore() },
        hooks: {
          onBrokerError: (event) => brokerErrors.push(event.error),
          onDeadLetter: (event) => deadLetters.push(event.reason),
        },
      });
      // Act: 65,400 bytes of the sender's own headers, which amqplib can still publish.
      await queues.publish(queue, 'payload', {
        headers: { ...headers, trace: 't'.repeat(65_400) },
      });
      await waitUntil('the message settled', () => deadLetters.length + brokerErrors.length > 0);
      // Assert
      expect(await consumer.close()).toBe(true);
      expect(brokerErrors).toEqual([]);
      expect(deadLetters).toEqual([reason]);
      const [letter, ...more] = await queues.drain(`${queue}.dlq`);
      expect(more).toEqual([]);
      expect(letter?.content.toString()).toBe('payload');
      const written = letter?.properties.headers ?? {};
      expect(String(written['x-idempotency-omitted-headers'])).toBe('trace');
      expect(written.trace).toBeUndefined();
      expect(String(written['x-idempotency-dead-letter-reason'])).toBe(reason);
      // Acked, not held: nothing left in the queue, nothing requeued when the connection closes.
      await consumer.connection.close();
      expect(await queues.count(queue)).toBe(0);
      expect(await queues.count(`${queue}.retry`)).toBe(0);
    },
  );

  it("keeps the x-idempotency-key header, the message's key, however large it is beside the others", async () => {
    // Arrange: a key of 255 characters in the header (no message id), larger than each of 283 trace
    // headers that fill the table with it.
    const queue = await queues.queue('huge-key');
    const deadLetters: string[] = [];
    const consumer = await queues.start(
      () => {
        throw new Error('declined');
      },
      {
        queue,
        name: queue,
        maxDeliveries: 1,
        idempotency: { store: memoryStore() },
        hooks: { onDeadLetter: (event) => deadLetters.push(event.reason) },
      },
    );
    const key = 'k'.repeat(255);
    const traces: Record<string, string> = {};
    for (let i = 0; i < 283; i++) traces[`t${String(i).padStart(3, '0')}`] = 'v'.repeat(220);
    // Act
    await queues.publish(queue, 'payload', { headers: { 'x-idempotency-key': key, ...traces } });
    await waitUntil('the message dead-lettered', () => deadLetters.length > 0);
    // Assert: before, the key's header went first (the largest), and a replay of the letter had no key.
    expect(await consumer.close()).toBe(true);
    const [letter] = await queues.drain(`${queue}.dlq`);
    const written = letter?.properties.headers ?? {};
    expect(String(written['x-idempotency-key'])).toBe(key);
    expect(String(written['x-idempotency-omitted-headers'])).not.toContain('x-idempotency-key');
    expect(String(written['x-idempotency-omitted-headers'])).toMatch(/^t\d{3}(,t\d{3})*$/);
  });
});
