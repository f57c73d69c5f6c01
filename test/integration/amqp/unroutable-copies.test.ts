/**
 * Retry and dead-letter copies that RabbitMQ cannot route (their queue was deleted, or never declared):
 * RabbitMQ confirms them anyway, so the adapter publishes them `mandatory` and must not ack the original
 * when one is returned. A dead letter that keeps failing must not run the handler again.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { memoryStore } from '../../../src/index.js';
import { AmqpQueues, waitUntil } from '../../helpers/amqp-queues.js';
import { env, requireService } from '../../helpers/env.js';

describe('amqp consumer: copies RabbitMQ cannot route', () => {
  const queues = new AmqpQueues();

  beforeAll(async () => {
    await requireService('RabbitMQ', env.amqpUrl);
    await queues.open();
  });
  afterAll(() => queues.close());

  it('does not ack the original when its retry copy is returned (retry queue deleted), and reports it', async () => {
    // Arrange
    const queue = await queues.queue('retry-gone');
    let calls = 0;
    const reported: Array<{ operation: string; error: unknown }> = [];
    const consumer = await queues.start(
      () => {
        calls++;
        throw new Error('transient failure');
      },
      {
        queue,
        name: queue,
        idempotency: { store: memoryStore() },
        backoff: { initial: 100, jitter: false },
        hooks: { onBrokerError: (event) => void reported.push(event) },
      },
    );
    await queues.channel.deleteQueue(`${queue}.retry`);
    // Act
    await queues.publish(queue, 'pay 100', { messageId: 'pay-1' });
    await waitUntil('the failed retry copy', () => reported.length > 0);
    await consumer.connection.close();
    // Assert
    expect(calls).toBe(1);
    expect(reported).toMatchObject([
      { operation: 'retry', error: { name: 'UnroutableCopyError', queue: `${queue}.retry` } },
    ]);
    expect(String((reported[0]?.error as Error | undefined)?.message)).toContain(
      `"${queue}.retry"`,
    );
    // Not acked: closing the consumer's connection gave the message back to the queue.
    await waitUntil('the message back in its queue', async () => (await queues.count(queue)) === 1);
  });

  it('keeps a dead letter its queue does not take, without running the handler again, until the queue exists', async () => {
    // Arrange
    const queue = await queues.queue('dlq-typo');
    const deadLetterQueue = `${queue}.dead-letters-typo`;
    queues.forget(deadLetterQueue);
    // declare: false, so the test declares the retry queue as the adapter would (and not the DLQ).
    await queues.channel.assertQueue(`${queue}.retry`, {
      durable: true,
      arguments: { 'x-dead-letter-exchange': '', 'x-dead-letter-routing-key': queue },
    });
    let calls = 0;
    const failed: unknown[] = [];
    const deadLetters: unknown[] = [];
    await queues.start(
      () => {
        calls++;
        throw new Error('card declined');
      },
      {
        queue,
        name: queue,
        idempotency: { store: memoryStore() },
        declare: false,
        deadLetterQueue,
        maxDeliveries: 1,
        minRetryDelay: '50ms',
        maxRetryDelay: '200ms',
        hooks: {
          onBrokerError: (event) => {
            if (event.operation === 'dead_letter') failed.push(event.error);
          },
          onDeadLetter: (event) => void deadLetters.push(event),
        },
      },
    );
    // Act
    await queues.publish(queue, 'charge', { messageId: 'charge-1' });
    await waitUntil('three failed dead-letter publishes', () => failed.length >= 3);
    const callsWhileFailing = calls;
    await queues.channel.assertQueue(deadLetterQueue, { durable: false });
    await waitUntil('the dead letter', async () => (await queues.count(deadLetterQueue)) === 1);
    // Assert
    expect(callsWhileFailing).toBe(1);
    expect(calls).toBe(1);
    expect(failed[0]).toMatchObject({ name: 'UnroutableCopyError', queue: deadLetterQueue });
    expect(deadLetters).toHaveLength(1);
    const [letter] = await queues.drain(deadLetterQueue);
    expect(letter?.properties.headers).toMatchObject({
      'x-idempotency-dead-letter-reason': 'handler_error',
      'x-idempotency-error': '{"name":"Error","message":"card declined"}',
      'x-idempotency-dead-letter-deliveries': 1,
    });
    expect(letter?.properties.headers?.['x-idempotency-pending-dead-letter']).toBeUndefined();
  });

  it('dead-letters a 200 KB error message, bounded and marked truncated, after one handler run', async () => {
    // Arrange
    const queue = await queues.queue('big-error');
    let calls = 0;
    await queues.start(
      () => {
        calls++;
        throw new Error(`upstream 502: ${'x'.repeat(200_000)}`);
      },
      {
        queue,
        name: queue,
        idempotency: { store: memoryStore() },
        maxDeliveries: 1,
        maxRetryDelay: '200ms',
      },
    );
    // Act
    await queues.publish(queue, 'a', { messageId: 'k1' });
    await waitUntil('the dead letter', async () => (await queues.count(`${queue}.dlq`)) === 1);
    // Assert
    const [letter] = await queues.drain(`${queue}.dlq`);
    const error = JSON.parse(String(letter?.properties.headers?.['x-idempotency-error']));
    expect(error.message.startsWith('upstream 502: xxx')).toBe(true);
    expect(error.message).toMatch(/… \[truncated, \d+ more characters\]$/);
    expect(error.message.length).toBeLessThan(5000);
    expect(calls).toBe(1);
  });
});
