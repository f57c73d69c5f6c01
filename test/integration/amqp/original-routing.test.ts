/**
 * The exchange and routing key a message was published with, through its retries. A retry copy reaches
 * the queue again from the retry queue, through the default exchange with the queue's name as its routing
 * key: a handler that tells its messages apart by routing key (one queue bound to `payment.capture` and
 * `payment.refund` on a topic exchange) saw every retry as a message for the routing key `orders`, and a
 * dead letter did not say where the message had been published.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AmqpMessage } from '../../../src/amqp/index.js';
import { memoryStore } from '../../../src/index.js';
import { AmqpQueues, waitUntil } from '../../helpers/amqp-queues.js';
import { env, requireService } from '../../helpers/env.js';

describe('amqp consumer: the routing a message was published with', () => {
  const queues = new AmqpQueues();
  const exchanges: string[] = [];

  beforeAll(async () => {
    await requireService('RabbitMQ', env.amqpUrl);
    await queues.open();
  });
  afterAll(async () => {
    for (const exchange of exchanges) await queues.channel.deleteExchange(exchange).catch(() => {});
    await queues.close();
  });

  // A queue bound to `payment.*` on a topic exchange of its own.
  async function paymentsQueue(name: string): Promise<{ queue: string; exchange: string }> {
    const queue = await queues.queue(name);
    const exchange = `ik-test.amqp-${randomUUID().slice(0, 8)}-${name}`;
    exchanges.push(exchange);
    await queues.channel.assertExchange(exchange, 'topic', { durable: false });
    await queues.channel.bindQueue(queue, exchange, 'payment.*');
    return { queue, exchange };
  }

  async function publish(exchange: string, routingKey: string, messageId: string): Promise<void> {
    queues.channel.publish(exchange, routingKey, Buffer.from('pay'), { messageId });
    await queues.channel.waitForConfirms();
  }

  it('shows the handler of a retry the exchange and routing key the message was published with', async () => {
    // Arrange: the handler fails the first run of each message.
    const { queue, exchange } = await paymentsQueue('routing-retry');
    const seen: string[] = [];
    await queues.start(
      (message: AmqpMessage, context) => {
        seen.push(
          `${context.deliveryCount} ${message.fields.exchange} ${message.fields.routingKey}`,
        );
        if (context.deliveryCount === 1) throw new Error('gateway down');
      },
      {
        queue,
        name: queue,
        idempotency: { store: memoryStore() },
        backoff: { initial: 200, jitter: false },
        minRetryDelay: 200,
        prefetch: 1,
      },
    );
    // Act
    await publish(exchange, 'payment.capture', 'routing-retry-1');
    await publish(exchange, 'payment.refund', 'routing-retry-2');
    await waitUntil('both retries', () => seen.length === 4);
    // Assert
    expect(seen.sort()).toEqual([
      `1 ${exchange} payment.capture`,
      `1 ${exchange} payment.refund`,
      `2 ${exchange} payment.capture`,
      `2 ${exchange} payment.refund`,
    ]);
  });

  it('records the exchange and routing key the message was published with on its dead letter', async () => {
    // Arrange: the first run fails (a retry), the second too, the last allowed (the dead letter).
    const { queue, exchange } = await paymentsQueue('routing-dead');
    await queues.start(
      () => {
        throw new Error('card declined');
      },
      {
        queue,
        name: queue,
        idempotency: { store: memoryStore() },
        maxDeliveries: 2,
        backoff: { initial: 200, jitter: false },
        minRetryDelay: 200,
      },
    );
    // Act
    await publish(exchange, 'payment.refund', 'routing-dead-1');
    await waitUntil('the dead letter', async () => (await queues.count(`${queue}.dlq`)) === 1);
    // Assert
    const [letter] = await queues.drain(`${queue}.dlq`);
    expect(letter?.properties.headers?.['x-idempotency-exchange']).toBe(exchange);
    expect(letter?.properties.headers?.['x-idempotency-routing-key']).toBe('payment.refund');
  });
});
