/**
 * `retryQueueType: 'quorum'`: the retry queue dead-letters a copy back to the consumed queue at least
 * once. With the classic default, a consumed queue that refuses the expired copy (full with
 * `reject-publish`) makes RabbitMQ drop it; a quorum retry queue keeps it and sends it again later
 * (`dead_letter_worker_publisher_confirm_timeout`, 3 minutes by default, hence the long timeouts).
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AmqpMessage, deliveryCount, idempotentConsumer } from '../../../src/amqp/index.js';
import { InvalidOptionsError, memoryStore } from '../../../src/index.js';
import { AmqpQueues, waitUntil } from '../../helpers/amqp-queues.js';
import { env, requireService } from '../../helpers/env.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('amqp consumer: the retry queue type', () => {
  const queues = new AmqpQueues();

  beforeAll(async () => {
    await requireService('RabbitMQ', env.amqpUrl);
    await queues.open();
  });
  afterAll(() => queues.close());

  // A queue at most one message long that refuses more (the case where classic dead-lettering drops).
  async function boundedQueue(name: string): Promise<string> {
    const queue = `ik-test.amqp-${randomUUID().slice(0, 8)}-${name}`;
    queues.forget(queue, `${queue}.retry`, `${queue}.dlq`);
    await queues.channel.assertQueue(queue, {
      durable: false,
      arguments: { 'x-max-length': 1, 'x-overflow': 'reject-publish' },
    });
    return queue;
  }

  /**
   * `pay-1` fails once and goes to the retry queue for 2 s; meanwhile `block` holds the only handler
   * slot (prefetch 1) and `fill` fills the queue, so the copy's TTL ends with the queue full. Then
   * `block` is released and the queue drains.
   */
  async function fullQueueWhenTheCopyExpires(name: string, type?: 'quorum') {
    const queue = await boundedQueue(name);
    const runs: Array<{ id: string; ok: boolean; count: number }> = [];
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    let blocked = false;
    const handler = async (message: AmqpMessage) => {
      const id = String(message.properties.messageId);
      const count = deliveryCount(message);
      if (id === 'block') {
        blocked = true;
        await gate;
      }
      const failing = id === 'pay-1' && !runs.some((run) => run.id === 'pay-1');
      runs.push({ id, ok: !failing, count });
      if (failing) throw new Error('ledger down');
    };
    const consumer = await queues.start(handler, {
      queue,
      name: queue,
      idempotency: { store: memoryStore() },
      maxDeliveries: 3,
      prefetch: 1,
      backoff: () => 2000,
      ...(type === undefined ? {} : { retryQueueType: type }),
    });
    await queues.publish(queue, 'pay', { messageId: 'pay-1' });
    await waitUntil('the retry copy', async () => (await queues.count(`${queue}.retry`)) === 1);
    const copied = performance.now();
    await queues.publish(queue, 'block', { messageId: 'block' });
    await waitUntil('block running', () => blocked);
    await queues.publish(queue, 'fill', { messageId: 'fill' });
    expect(await queues.count(queue)).toBe(1);
    // The copy's TTL (2 s) ends while the queue is full: refused.
    expect(performance.now() - copied).toBeLessThan(1500);
    await sleep(3000);
    expect(runs.filter((run) => run.id === 'pay-1')).toHaveLength(1);
    release();
    await waitUntil('the queue drained', () => runs.some((run) => run.id === 'fill'));
    return { queue, runs, consumer };
  }

  it("with retryQueueType 'quorum', a copy refused by a full queue is delivered once it has room, and run once", async () => {
    // Arrange, Act
    const { queue, runs, consumer } = await fullQueueWhenTheCopyExpires('quorum', 'quorum');
    await waitUntil(
      'pay-1 again',
      () => runs.filter((run) => run.id === 'pay-1').length === 2,
      240_000,
    );
    await sleep(1000);
    // Assert: one failed run, one successful run, counted as the second delivery.
    expect(runs.filter((run) => run.id === 'pay-1')).toEqual([
      { id: 'pay-1', ok: false, count: 1 },
      { id: 'pay-1', ok: true, count: 2 },
    ]);
    expect(await queues.count(`${queue}.dlq`)).toBe(0);
    await consumer.close();
  }, 300_000);

  it('with the classic default, RabbitMQ drops the copy a full queue refuses (documented loss)', async () => {
    // Arrange, Act
    const { queue, runs, consumer } = await fullQueueWhenTheCopyExpires('classic');
    await sleep(3000);
    // Assert: pay-1 never came back, and nothing holds it.
    expect(runs.filter((run) => run.id === 'pay-1')).toHaveLength(1);
    expect(await queues.count(`${queue}.retry`)).toBe(0);
    expect(await queues.count(`${queue}.dlq`)).toBe(0);
    await consumer.close();
  }, 30_000);

  it("with retryQueueType 'quorum', retries, counts deliveries and dead-letters after maxDeliveries", async () => {
    // Arrange
    const queue = await queues.queue('quorum-dlq');
    const counts: number[] = [];
    const consumer = await queues.start(
      (message) => {
        counts.push(deliveryCount(message));
        throw new Error('down');
      },
      {
        queue,
        name: queue,
        idempotency: { store: memoryStore() },
        maxDeliveries: 3,
        backoff: () => 50,
        retryQueueType: 'quorum',
      },
    );
    // Act
    await queues.publish(queue, 'pay', { messageId: 'pay-2' });
    await waitUntil('the dead letter', async () => (await queues.count(`${queue}.dlq`)) === 1);
    // Assert
    expect(counts).toEqual([1, 2, 3]);
    const [letter] = await queues.drain(`${queue}.dlq`);
    expect(letter?.properties.headers?.['x-idempotency-dead-letter-deliveries']).toBe(3);
    expect(await queues.count(`${queue}.retry`)).toBe(0);
    await consumer.close();
  });

  it('an in-progress key is redelivered through a quorum retry queue and run once', async () => {
    // Arrange: two consumers on one store; the first holds the key while the second receives a copy.
    const queue = await queues.queue('quorum-in-progress');
    const store = memoryStore();
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    let runs = 0;
    const retries: string[] = [];
    let duplicates = 0;
    const options = {
      queue,
      name: queue,
      idempotency: { store },
      backoff: () => 50,
      minRetryDelay: '50ms' as const,
      retryQueueType: 'quorum' as const,
      hooks: {
        onRetry: ({ reason }: { reason: string }) => void retries.push(reason),
        onDuplicate: () => void duplicates++,
      },
    };
    const first = await queues.start(async () => {
      runs++;
      await gate;
    }, options);
    // Act
    await queues.publish(queue, 'pay', { messageId: 'pay-3' });
    await waitUntil('running', () => runs === 1);
    await queues.publish(queue, 'pay', { messageId: 'pay-3' });
    await sleep(300);
    release();
    await waitUntil('the duplicate acked', () => duplicates === 1);
    // Assert: the second copy went through the retry queue (in progress), then was acked as a duplicate.
    expect(retries.length).toBeGreaterThan(0);
    expect(new Set(retries)).toEqual(new Set(['in_progress']));
    expect(runs).toBe(1);
    expect(await queues.count(`${queue}.retry`)).toBe(0);
    expect(await queues.count(queue)).toBe(0);
    await first.close();
  });

  it.each([
    ['classic', 'quorum'],
    ['quorum', 'classic'],
  ] as const)(
    'a retry queue declared %s, met by retryQueueType %s, fails with an error naming the options',
    async (existing, wanted) => {
      // Arrange
      const queue = await queues.queue(`conflict-${existing}`);
      const { channel } = await queues.consumerChannel();
      await (
        await idempotentConsumer(channel, () => {}, {
          queue,
          name: queue,
          idempotency: { store: memoryStore() },
          retryQueueType: existing,
        })
      ).close();
      const other = await queues.consumerChannel();
      // Act
      const started = idempotentConsumer(other.channel, () => {}, {
        queue,
        name: queue,
        idempotency: { store: memoryStore() },
        retryQueueType: wanted,
      });
      // Assert
      await expect(started).rejects.toBeInstanceOf(InvalidOptionsError);
      await expect(started).rejects.toThrow(/retryQueueType.*declare: false|declare: false/s);
      await expect(started).rejects.toThrow(new RegExp(`${queue}\\.retry`));
    },
  );

  it('a retry queue declared by hand as quorum, met by the default, fails with an error naming the options', async () => {
    // Arrange: the documented manual declaration of earlier versions, then a consumer without declare: false.
    const queue = await queues.queue('conflict-by-hand');
    await queues.channel.assertQueue(`${queue}.retry`, {
      durable: true,
      arguments: {
        'x-queue-type': 'quorum',
        'x-dead-letter-exchange': '',
        'x-dead-letter-routing-key': queue,
        'x-dead-letter-strategy': 'at-least-once',
        'x-overflow': 'reject-publish',
      },
    });
    const { channel } = await queues.consumerChannel();
    // Act
    const started = idempotentConsumer(channel, () => {}, {
      queue,
      name: queue,
      idempotency: { store: memoryStore() },
    });
    // Assert: not a bare channel error (406 PRECONDITION_FAILED) but one that says what to do.
    await expect(started).rejects.toBeInstanceOf(InvalidOptionsError);
    await expect(started).rejects.toThrow(/retryQueueType 'classic'.*declare: false/s);
    await expect(started).rejects.toMatchObject({ cause: { code: 406 } });
  });

  it('refuses an unknown retryQueueType before any call on the channel', async () => {
    const queue = await queues.queue('bad-type');
    const { channel } = await queues.consumerChannel();
    await expect(
      idempotentConsumer(channel, () => {}, {
        queue,
        name: queue,
        idempotency: { store: memoryStore() },
        retryQueueType: 'stream' as never,
      }),
    ).rejects.toThrow(/retryQueueType: must be 'classic' or 'quorum'/);
    // The channel is still usable.
    await channel.checkQueue(queue);
  });
});
