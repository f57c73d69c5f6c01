/**
 * The consumer on a quorum queue with a `delivery-limit` and no dead-letter exchange of its own: past the
 * limit RabbitMQ drops a message it was returned more often (`nack` with requeue, a closed channel), with
 * nothing said. RabbitMQ 4.0 to 4.2 give every quorum queue a limit of 20 by default; the server of
 * these tests (3.10+) has none by default, so each test sets a small one (`x-delivery-limit: 2`).
 *
 * Retries go through the retry queue as copies, new messages, which never count toward it. What did: a
 * message no retry copy fits (huge headers), held through a store outage, was requeued at the end of each
 * delay and dropped at the third, never run; and `close()` handed a delivery back before the broker took
 * its cancel in, so it came straight back and was handed back again, each time counted by RabbitMQ (and
 * by the consumer, which reads `x-delivery-count`): dead-lettered after a single failed run.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type AmqpConsumerErrorEvent,
  type AmqpMessage,
  deliveryCount,
} from '../../../src/amqp/index.js';
import { memoryStore, type Store } from '../../../src/index.js';
import { AmqpQueues, waitUntil } from '../../helpers/amqp-queues.js';
import { env, requireService } from '../../helpers/env.js';

// 65,400 bytes of the sender's own headers: amqplib can still publish the message, not a retry copy of it.
const HUGE = { trace: 't'.repeat(65_400) };
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('amqp consumer: a quorum queue with a delivery-limit', () => {
  const queues = new AmqpQueues();
  const run = randomUUID().slice(0, 8);

  beforeAll(async () => {
    await requireService('RabbitMQ', env.amqpUrl);
    await queues.open();
  });
  afterAll(() => queues.close());

  /** A quorum queue that drops a message returned to it more than twice (no dead-letter exchange). */
  async function quorumQueue(name: string): Promise<string> {
    const queue = `ik-test.rqq-${run}-${name}`;
    queues.forget(queue, `${queue}.retry`, `${queue}.dlq`);
    await queues.channel.assertQueue(queue, {
      durable: true,
      arguments: { 'x-queue-type': 'quorum', 'x-delivery-limit': 2 },
    });
    return queue;
  }

  it.each(['classic', 'quorum'] as const)(
    'retries handler errors past the limit and dead-letters after maxDeliveries (%s retry queue)',
    async (retryQueueType) => {
      // Arrange: maxDeliveries 5, over the queue's limit of 2; `slow` is delivered twice at once.
      const queue = await quorumQueue(`retries-${retryQueueType}`);
      const runs: Array<{ id: string; count: number }> = [];
      const letters: number[] = [];
      let duplicates = 0;
      const consumer = await queues.start(
        async (message: AmqpMessage) => {
          const id = String(message.properties.messageId);
          runs.push({ id, count: deliveryCount(message) });
          if (id === 'slow') await sleep(1000);
          if (id === 'recovers' && runs.filter((r) => r.id === id).length < 5) {
            throw new Error('not yet');
          }
          if (id === 'fails') throw new Error('always');
        },
        {
          queue,
          name: queue,
          maxDeliveries: 5,
          prefetch: 4,
          retryQueueType,
          minRetryDelay: 50,
          backoff: () => 100,
          idempotency: { store: memoryStore() },
          hooks: {
            onDeadLetter: (event) => letters.push(event.deliveryCount),
            onDuplicate: () => {
              duplicates += 1;
            },
          },
        },
      );
      // Act
      for (const id of ['recovers', 'slow', 'slow', 'fails']) {
        await queues.publish(queue, id, { messageId: id });
      }
      await waitUntil(
        'every message settled',
        () => letters.length === 1 && duplicates === 1 && runs.length === 11,
        20_000,
      );
      // Assert: five runs each, counted 1 to 5; `slow` ran once.
      expect(await consumer.close()).toBe(true);
      const counts = (id: string) => runs.filter((r) => r.id === id).map((r) => r.count);
      expect(counts('recovers')).toEqual([1, 2, 3, 4, 5]);
      expect(counts('fails')).toEqual([1, 2, 3, 4, 5]);
      expect(counts('slow')).toEqual([1]);
      expect(letters).toEqual([5]);
      expect(await queues.count(`${queue}.dlq`)).toBe(1);
      expect(await queues.count(queue)).toBe(0);
    },
    30_000,
  );

  it('runs a message no retry copy fits once the store is back, however often it was held', async () => {
    // Arrange: the store refuses every claim for 3 s; retries every 100–200 ms.
    const queue = await quorumQueue('held');
    const store = memoryStore();
    let down = true;
    const claim: Store['claim'] = (...args) =>
      down ? Promise.reject(new Error('ECONNREFUSED')) : store.claim(...args);
    const counts: number[] = [];
    let retries = 0;
    const consumer = await queues.start(
      (_message, context) => void counts.push(context.deliveryCount),
      {
        queue,
        name: queue,
        prefetch: 1,
        minRetryDelay: 100,
        maxRetryDelay: 200,
        idempotency: { store: { ...store, claim } },
        hooks: {
          onRetry: () => {
            retries += 1;
          },
        },
      },
    );
    // Act
    await queues.publish(queue, 'huge', { messageId: 'pay-1', headers: HUGE });
    await sleep(3000);
    down = false;
    await waitUntil('the message ran', () => counts.length === 1, 5000);
    // Assert: held and processed again at each retry, each counted. Before, it was requeued at each retry
    // and RabbitMQ dropped it at the third, never run.
    expect(retries).toBeGreaterThan(3);
    expect(counts).toEqual([retries + 1]);
    expect(await consumer.close()).toBe(true);
    await consumer.connection.close();
    expect(await queues.count(queue)).toBe(0);
    expect(await queues.count(`${queue}.dlq`)).toBe(0);
  }, 20_000);

  it('hands a delivery back once on close(): the next consumer counts it once', async () => {
    // Arrange: `block` holds the only handler slot; `pay` waits behind it (prefetch 2).
    const queue = await quorumQueue('close');
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    let blocked = false;
    const a = await queues.start(
      async () => {
        blocked = true;
        await gate;
      },
      { queue, name: queue, prefetch: 2, concurrency: 1, idempotency: { store: memoryStore() } },
    );
    await queues.publish(queue, 'block', { messageId: 'block' });
    await waitUntil('block running', () => blocked);
    await queues.publish(queue, 'pay', { messageId: 'pay' });
    await sleep(300);
    // Act
    const closing = a.close();
    release();
    expect(await closing).toBe(true);
    const runs: Array<{ count: number; returns: unknown }> = [];
    const letters: number[] = [];
    const b = await queues.start(
      (message) => {
        runs.push({
          count: deliveryCount(message),
          returns: message.properties.headers?.['x-delivery-count'],
        });
        throw new Error('ledger down');
      },
      {
        queue,
        name: queue,
        maxDeliveries: 3,
        backoff: () => 100,
        idempotency: { store: memoryStore() },
        hooks: { onDeadLetter: (event) => letters.push(event.deliveryCount) },
      },
    );
    await waitUntil('the dead letter', () => letters.length === 1, 10_000);
    // Assert: returned once (counted 2 at its first run). Before, it was returned two times or more, and
    // dead-lettered after a single run.
    expect(runs).toEqual([
      { count: 2, returns: 1 },
      { count: 3, returns: undefined },
    ]);
    expect(letters).toEqual([3]);
    expect(await b.close()).toBe(true);
  }, 20_000);

  it('close() drains a handler in flight, its ack taken by the broker before close() resolves', async () => {
    // Arrange
    const queue = await quorumQueue('drain');
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    let started = false;
    let executed = 0;
    const consumer = await queues.start(
      async () => {
        started = true;
        await gate;
      },
      {
        queue,
        name: queue,
        idempotency: { store: memoryStore() },
        hooks: {
          onExecuted: () => {
            executed += 1;
          },
        },
      },
    );
    await queues.publish(queue, 'pay', { messageId: 'pay-1' });
    await waitUntil('running', () => started);
    // Act: close() while the handler runs, then the connection closed as soon as it resolved.
    const closing = consumer.close();
    await sleep(200);
    release();
    expect(await closing).toBe(true);
    await consumer.connection.close();
    // Assert: before, the ack was still in amqplib when the connection closed, and RabbitMQ requeued the
    // message (one more x-delivery-count), to be delivered again.
    expect(executed).toBe(1);
    await sleep(1000);
    expect(await queues.count(queue)).toBe(0);
  }, 20_000);

  it('ends the consumer (cancelled) when its quorum queue is deleted', async () => {
    // Arrange
    const queue = await quorumQueue('deleted');
    const errors: AmqpConsumerErrorEvent[] = [];
    const consumer = await queues.start(() => {}, {
      queue,
      name: queue,
      idempotency: { store: memoryStore() },
      hooks: { onConsumerError: (event) => void errors.push(event) },
    });
    // Act
    await queues.channel.deleteQueue(queue);
    await consumer.done;
    // Assert
    expect(errors.map((event) => event.operation)).toEqual(['cancelled']);
  });
});
