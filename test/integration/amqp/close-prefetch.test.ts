/**
 * The RabbitMQ consumer's `close()` leaves the channel's prefetch as the application set it. Its last
 * round trip (the broker has taken every ack before `close()` resolves) was a `basic.qos` of the
 * consumer's own prefetch, which sets the prefetch of every consumer started on the channel later: an
 * application that had set `prefetch(1)` since got its next consumer pushed 10 unacked messages.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AmqpMessage, idempotentConsumer } from '../../../src/amqp/index.js';
import { memoryStore } from '../../../src/index.js';
import { AmqpQueues, waitUntil } from '../../helpers/amqp-queues.js';
import { env, requireService } from '../../helpers/env.js';

describe('amqp consumer: close() and the channel prefetch', () => {
  const queues = new AmqpQueues();

  beforeAll(async () => {
    await requireService('RabbitMQ', env.amqpUrl);
    await queues.open();
  });
  afterAll(() => queues.close());

  it('leaves the prefetch the application set after it started: the next consumer gets that many', async () => {
    // Arrange: the idempotent consumer (prefetch 10) has handled a message; then the application sets
    // its own prefetch of 1 on the channel, for the consumer it starts after close().
    const queue = await queues.queue('close-prefetch');
    const next = await queues.queue('close-prefetch-next');
    const { channel } = await queues.consumerChannel();
    let handled = 0;
    const consumer = await idempotentConsumer(
      channel,
      () => {
        handled += 1;
      },
      { queue, name: queue, prefetch: 10, idempotency: { store: memoryStore() } },
    );
    await queues.publish(queue, 'pay', { messageId: 'pay-1' });
    await waitUntil('handled', () => handled === 1);
    await channel.prefetch(1);
    // Act
    expect(await consumer.close()).toBe(true);
    for (let i = 0; i < 5; i++) await queues.publish(next, 'job', { messageId: `job-${i}` });
    const received: AmqpMessage[] = [];
    await channel.consume(next, (message) => {
      if (message !== null) received.push(message as unknown as AmqpMessage);
    });
    await waitUntil('a first delivery', () => received.length > 0);
    await sleep(300);
    // Assert: none acked, so the prefetch bounds what was pushed. Before, 5 (close() had set 10 again).
    expect(received).toHaveLength(1);
  });
});
