/**
 * A retry copy's delay is its per-message TTL, which RabbitMQ takes only as a non-negative whole number of
 * ms: `'NaN'`, `'-5'` or `'Infinity'` is a channel error (406), and every delivery on the channel is lost
 * with it. A backoff function answering those is reported and its delivery redelivered after
 * `maxRetryDelay`.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { memoryStore } from '../../../src/index.js';
import { AmqpQueues, waitUntil } from '../../helpers/amqp-queues.js';
import { env, requireService } from '../../helpers/env.js';

describe('amqp consumer: retry delays at the edges of the broker TTL', () => {
  const queues = new AmqpQueues();

  beforeAll(async () => {
    await requireService('RabbitMQ', env.amqpUrl);
    await queues.open();
  });
  afterAll(() => queues.close());

  it.each([
    ['NaN', () => Number.NaN],
    ['a negative delay', () => -5],
    ['Infinity', () => Number.POSITIVE_INFINITY],
    ['1e21 ms (the string "1e+21")', () => 1e21],
  ])(
    'reports a backoff function answering %s and redelivers after maxRetryDelay, its channel open',
    async (_name, backoff) => {
      // Arrange
      const queue = await queues.queue('delay-range');
      let calls = 0;
      const reported: string[] = [];
      const consumer = await queues.start(
        () => {
          calls++;
          throw new Error('down');
        },
        {
          queue,
          name: queue,
          idempotency: { store: memoryStore() },
          maxDeliveries: 3,
          maxRetryDelay: '2s',
          backoff,
          hooks: {
            onBrokerError: ({ operation, error }) => reported.push(`${operation}: ${error}`),
          },
        },
      );
      let closed = false;
      consumer.connection.on('close', () => (closed = true));
      // Act
      await queues.publish(queue, 'pay', { messageId: 'pay-1' });
      await waitUntil('the retry copy', async () => (await queues.count(`${queue}.retry`)) === 1);
      // Assert
      expect(calls).toBe(1);
      const [copy] = await queues.drain(`${queue}.retry`);
      expect((copy?.properties as { expiration?: string } | undefined)?.expiration).toBe('2000');
      expect(closed).toBe(false);
      expect(reported).toEqual([
        expect.stringMatching(
          /^process: InvalidOptionsError: backoff: the function answered .+ for delivery 1;/,
        ),
      ]);
      await consumer.close();
    },
  );
});
