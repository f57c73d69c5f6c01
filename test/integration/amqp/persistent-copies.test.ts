/**
 * Retry copies and dead letters are persistent, whatever the original's delivery mode. amqplib publishes
 * transient (delivery mode 1) unless told `persistent: true`, and a quorum queue keeps such a message
 * across a broker restart anyway; a copy that kept the mode went to the classic retry or dead-letter
 * queue, which confirmed it from memory, so the original was acked on that confirm and a broker restart
 * dropped the copy: the message lost. (Seen on a RabbitMQ 3.10 node of its own, restarted with
 * `rabbitmqctl stop_app && start_app`: the retry copy and the dead letter were gone, the originals acked.
 * These tests cannot restart the shared broker; they check the mode RabbitMQ delivers the copies with.)
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AmqpMessage } from '../../../src/amqp/index.js';
import { memoryStore } from '../../../src/index.js';
import { AmqpQueues, waitUntil } from '../../helpers/amqp-queues.js';
import { env, requireService } from '../../helpers/env.js';

describe('amqp consumer: persistent copies', () => {
  const queues = new AmqpQueues();

  beforeAll(async () => {
    await requireService('RabbitMQ', env.amqpUrl);
    await queues.open();
  });
  afterAll(() => queues.close());

  // The adapter's message type names only the properties it reads.
  const deliveryMode = (message: AmqpMessage | undefined) =>
    (message?.properties as { deliveryMode?: number } | undefined)?.deliveryMode;

  // A durable quorum queue: a transient message there survives a broker restart.
  async function quorumQueue(name: string): Promise<string> {
    const queue = `ik-test.amqp-${randomUUID().slice(0, 8)}-${name}`;
    queues.forget(queue, `${queue}.retry`, `${queue}.dlq`);
    await queues.channel.assertQueue(queue, {
      durable: true,
      arguments: { 'x-queue-type': 'quorum' },
    });
    return queue;
  }

  it('publishes the retry copy of a transient message persistent', async () => {
    // Arrange: the gateway is down; the copy waits a minute in the (classic) retry queue.
    const queue = await quorumQueue('transient-retry');
    await queues.start(
      () => {
        throw new Error('gateway down');
      },
      {
        queue,
        name: queue,
        idempotency: { store: memoryStore() },
        backoff: { initial: 60_000, jitter: false },
      },
    );
    // Act: amqplib's default publish, transient.
    await queues.publish(queue, 'pay', { messageId: 'transient-retry-1' });
    await waitUntil('the retry copy', async () => (await queues.count(`${queue}.retry`)) === 1);
    // Assert: the original is acked (not back in the queue), so the copy is all there is of it.
    expect(await queues.count(queue)).toBe(0);
    const [copy] = await queues.drain(`${queue}.retry`);
    expect(copy?.properties.messageId).toBe('transient-retry-1');
    expect(deliveryMode(copy)).toBe(2);
  });

  it('publishes the dead letter of a transient message persistent', async () => {
    // Arrange
    const queue = await quorumQueue('transient-dead');
    await queues.start(
      () => {
        throw new Error('card declined');
      },
      { queue, name: queue, idempotency: { store: memoryStore() }, maxDeliveries: 1 },
    );
    // Act: published explicitly transient.
    await queues.publish(queue, 'pay', { messageId: 'transient-dead-1', deliveryMode: 1 });
    await waitUntil('the dead letter', async () => (await queues.count(`${queue}.dlq`)) === 1);
    // Assert
    expect(await queues.count(queue)).toBe(0);
    const [letter] = await queues.drain(`${queue}.dlq`);
    expect(letter?.properties.messageId).toBe('transient-dead-1');
    expect(deliveryMode(letter)).toBe(2);
  });
});
