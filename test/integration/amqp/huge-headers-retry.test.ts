/**
 * A message whose own headers leave no room in amqplib's 64 KB header table for a retry copy's: the copy
 * cannot be published (amqplib throws a `RangeError`), and headers cannot be left out of it (the handler
 * would run on a changed message). Before, the message then stayed unacked on its prefetch slot until the
 * channel closed (with `prefetch: 1` the consumer received nothing more), and came back to do the same.
 * Now a handler error is dead-lettered at once (`headers_too_large`), and an in-progress redelivery is
 * handed back to the queue (`nack` with requeue) after its delay: it runs, or is acked as a duplicate.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { memoryStore, type Store } from '../../../src/index.js';
import { AmqpQueues, waitUntil } from '../../helpers/amqp-queues.js';
import { env, requireService } from '../../helpers/env.js';

// 65,400 bytes of the sender's own headers: amqplib can still publish the message, not a retry copy of it.
const HUGE = { trace: 't'.repeat(65_400) };

describe('amqp consumer: a retry copy that cannot fit 64 KB of headers', () => {
  const queues = new AmqpQueues();

  beforeAll(async () => {
    await requireService('RabbitMQ', env.amqpUrl);
    await queues.open();
  });
  afterAll(() => queues.close());

  it('dead-letters a handler error at once as headers_too_large, and goes on consuming', async () => {
    // Arrange: prefetch 1, so that a message held unacked would stop the consumer.
    const queue = await queues.queue('amqpretry-handler-error');
    const brokerErrors: unknown[] = [];
    const deadLetters: string[] = [];
    const ran: string[] = [];
    const consumer = await queues.start(
      (message) => {
        const body = message.content.toString();
        ran.push(body);
        if (body === 'huge') throw new Error('gateway down');
      },
      {
        queue,
        name: queue,
        maxDeliveries: 3,
        prefetch: 1,
        idempotency: { store: memoryStore() },
        hooks: {
          onBrokerError: (event) => brokerErrors.push(event.error),
          onDeadLetter: (event) => deadLetters.push(event.reason),
        },
      },
    );
    // Act
    await queues.publish(queue, 'huge', { messageId: 'pay-1', headers: HUGE });
    await queues.publish(queue, 'next', { messageId: 'pay-2' });
    await waitUntil('the next message ran', () => ran.includes('next'));
    // Assert
    expect(await consumer.close()).toBe(true);
    expect(brokerErrors).toEqual([]);
    expect(ran).toEqual(['huge', 'next']);
    expect(deadLetters).toEqual(['headers_too_large']);
    const [letter, ...more] = await queues.drain(`${queue}.dlq`);
    expect(more).toEqual([]);
    expect(letter?.content.toString()).toBe('huge');
    const written = letter?.properties.headers ?? {};
    expect(String(written['x-idempotency-dead-letter-reason'])).toBe('headers_too_large');
    expect(JSON.parse(String(written['x-idempotency-error'])).message).toBe('gateway down');
    expect(String(written['x-idempotency-omitted-headers'])).toBe('trace');
    await consumer.connection.close();
    expect(await queues.count(queue)).toBe(0);
    expect(await queues.count(`${queue}.retry`)).toBe(0);
  });

  it('hands an in-progress redelivery back to the queue after its delay, then acks it as a duplicate', async () => {
    // Arrange: two deliveries of one payment; the first holds the key while the second is processed.
    const queue = await queues.queue('amqpretry-in-progress');
    const brokerErrors: unknown[] = [];
    const retries: string[] = [];
    let duplicates = 0;
    let runs = 0;
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const consumer = await queues.start(
      async () => {
        runs += 1;
        await gate;
      },
      {
        queue,
        name: queue,
        prefetch: 2,
        minRetryDelay: 100,
        idempotency: { store: memoryStore() },
        hooks: {
          onBrokerError: (event) => brokerErrors.push(event.error),
          onRetry: (event) => retries.push(event.reason),
          onDuplicate: () => {
            duplicates += 1;
          },
        },
      },
    );
    // Act
    await queues.publish(queue, 'huge', { messageId: 'pay-1', headers: HUGE });
    await queues.publish(queue, 'huge', { messageId: 'pay-1', headers: HUGE });
    await waitUntil('the second delivery found the first in progress', () => retries.length > 0);
    release();
    await waitUntil('the second delivery was acked as a duplicate', () => duplicates === 1);
    // Assert
    expect(await consumer.close()).toBe(true);
    expect(brokerErrors).toEqual([]);
    expect(runs).toBe(1);
    expect(retries.every((reason) => reason === 'in_progress')).toBe(true);
    await consumer.connection.close();
    expect(await queues.count(queue)).toBe(0);
    expect(await queues.count(`${queue}.retry`)).toBe(0);
    expect(await queues.count(`${queue}.dlq`)).toBe(0);
  });
  it('hands a store-unavailable redelivery back to the queue after its delay, then runs it once', async () => {
    // Arrange: the store refuses the first claim.
    const queue = await queues.queue('amqpretry-store-down');
    const store = memoryStore();
    let refused = 0;
    const claim: Store['claim'] = (...args) => {
      if (refused === 0) {
        refused += 1;
        return Promise.reject(new Error('ECONNREFUSED'));
      }
      return store.claim(...args);
    };
    const brokerErrors: unknown[] = [];
    const retries: string[] = [];
    let executed = 0;
    let runs = 0;
    const consumer = await queues.start(
      () => {
        runs += 1;
      },
      {
        queue,
        name: queue,
        prefetch: 1,
        minRetryDelay: 100,
        idempotency: { store: { ...store, claim } },
        hooks: {
          onBrokerError: (event) => brokerErrors.push(event.error),
          onRetry: (event) => retries.push(event.reason),
          onExecuted: () => {
            executed += 1;
          },
        },
      },
    );
    // Act
    await queues.publish(queue, 'huge', { messageId: 'pay-1', headers: HUGE });
    await waitUntil('the message ran', () => executed === 1);
    // Assert
    expect(await consumer.close()).toBe(true);
    expect(brokerErrors).toEqual([]);
    expect(retries).toEqual(['store_unavailable']);
    expect(runs).toBe(1);
    await consumer.connection.close();
    expect(await queues.count(queue)).toBe(0);
    expect(await queues.count(`${queue}.retry`)).toBe(0);
    expect(await queues.count(`${queue}.dlq`)).toBe(0);
  });
  it('hands a message held for its delay back to the queue at once when the consumer closes', async () => {
    // Arrange: consumer A holds the key; consumer B gets the second delivery, to hold for 20 s.
    const queue = await queues.queue('amqpretry-close');
    const store = memoryStore();
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    let started = false;
    const a = await queues.start(
      async () => {
        started = true;
        await gate;
      },
      { queue, name: queue, prefetch: 1, idempotency: { store } },
    );
    await queues.publish(queue, 'huge', { messageId: 'pay-1', headers: HUGE });
    await waitUntil('consumer A holds the key', () => started);
    const retries: number[] = [];
    const b = await queues.start(() => {}, {
      queue,
      name: queue,
      prefetch: 1,
      minRetryDelay: 20_000,
      maxRetryDelay: 30_000,
      idempotency: { store },
      hooks: { onRetry: (event) => retries.push(event.delayMs) },
    });
    await queues.publish(queue, 'huge', { messageId: 'pay-1', headers: HUGE });
    await waitUntil('consumer B found the key in progress', () => retries.length === 1);
    // Act
    const closed = await b.close();
    // Assert: back in the queue now, not 20 s later (nor when B's channel closes).
    expect(closed).toBe(true);
    await waitUntil(
      'the message is back in the queue',
      async () => (await queues.count(queue)) === 1,
    );
    release();
    expect(await a.close()).toBe(true);
  });
});
