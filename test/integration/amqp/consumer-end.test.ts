/**
 * A RabbitMQ consumer that stops receiving without close() — its queue deleted, its channel closed — says
 * so and resolves `done`, instead of leaving the service up and idle.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AmqpConsumerErrorEvent } from '../../../src/amqp/index.js';
import { memoryStore } from '../../../src/index.js';
import { AmqpQueues } from '../../helpers/amqp-queues.js';
import { env, requireService } from '../../helpers/env.js';

describe('amqp consumer: the end of receiving', () => {
  const queues = new AmqpQueues();

  beforeAll(async () => {
    await requireService('RabbitMQ', env.amqpUrl);
    await queues.open();
  });
  afterAll(() => queues.close());

  /** A consumer on a new queue, and what it reports to onConsumerError. */
  async function watched(name: string) {
    const queue = await queues.queue(name);
    const errors: AmqpConsumerErrorEvent[] = [];
    const consumer = await queues.start(() => {}, {
      queue,
      name: queue,
      idempotency: { store: memoryStore() },
      hooks: { onConsumerError: (event) => errors.push(event) },
    });
    return { queue, errors, consumer };
  }

  it('resolves done and reports `cancelled` when the broker cancels the consumer (its queue deleted)', async () => {
    // Arrange
    const { queue, errors, consumer } = await watched('deleted');
    // Act
    await queues.channel.deleteQueue(queue);
    await consumer.done;
    // Assert
    expect(errors.map((e) => [e.consumer, e.operation])).toEqual([[queue, 'cancelled']]);
    expect(String(errors[0]?.error)).toMatch(/cancelled consumer .* \(was the queue deleted\?\)/);
  });

  it('resolves done and reports `channel-closed` when its connection goes away', async () => {
    const { errors, consumer } = await watched('connection');
    await consumer.connection.close();
    await consumer.done;
    expect(errors.map((e) => e.operation)).toEqual(['channel-closed']);
  });

  it('resolves done after close(), with nothing reported, even when the channel closes afterwards', async () => {
    const { errors, consumer } = await watched('closed');
    await expect(consumer.close()).resolves.toBe(true);
    await consumer.done;
    await consumer.connection.close();
    expect(errors).toEqual([]);
  });
});
