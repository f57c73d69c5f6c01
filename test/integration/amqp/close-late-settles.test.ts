/**
 * `close()` and copies given up on, against a real RabbitMQ: the consumer's connection goes through a frame
 * proxy that holds the broker's confirms back, the link otherwise working, so a copy's confirm passes
 * `brokerTimeout` and its delivery settles, freeing its slot; but the copy goes on, and when its confirm
 * comes its original is acked (and a dead letter reported, `onDeadLetter`). `close()` waits for it, within
 * `drainTimeout`. (Before, `close()` resolved `true` as soon as the cancel was answered and no slot was
 * held: a letter confirmed after it was never reported, and a channel closed right after it requeued the
 * original of a retry copy already in the retry queue, a second copy of the message.)
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idempotentConsumer } from '../../../src/amqp/index.js';
import { createIdempotency, memoryStore } from '../../../src/index.js';
import { BASIC_ACK } from '../../helpers/amqp-frame-proxy.js';
import { AmqpQueues, waitUntil } from '../../helpers/amqp-queues.js';
import { closeThenRelease } from '../../helpers/close-hooks.js';
import { env, requireService } from '../../helpers/env.js';

describe('amqp consumer: close() and copies still awaiting their confirm', () => {
  const queues = new AmqpQueues();

  beforeAll(async () => {
    await requireService('RabbitMQ', env.amqpUrl);
    await queues.open();
  });
  afterAll(() => queues.close());

  /**
   * A consumer of a new queue whose handler always fails, through a proxy holding confirms back from now
   * on; `maxDeliveries` 1 makes the failure a dead letter, else a retry (a minute away: its copy stays in
   * the retry queue for the test). `order` records the hooks and `close()`'s end as they happen.
   */
  async function heldConsumer(name: string, maxDeliveries: number) {
    const queue = await queues.queue(name);
    const { proxy, connection, channel } = await queues.proxiedChannel();
    const order: string[] = [];
    const consumer = await idempotentConsumer(
      channel,
      () => {
        throw new Error('card declined');
      },
      {
        queue,
        name: queue,
        idempotency: createIdempotency({ store: memoryStore() }),
        maxDeliveries,
        backoff: { initial: '1m', max: '1m', jitter: false },
        brokerTimeout: '200ms',
        drainTimeout: '5s',
        hooks: {
          onBrokerError: (event) => void order.push(`given up: ${event.operation}`),
          onDeadLetter: () => void order.push('dead letter'),
        },
      },
    );
    proxy.holdBack(BASIC_ACK);
    await queues.publish(queue, 'a', { messageId: 'pay-declined' });
    await waitUntil('the copy to be given up on', () => order.length === 1);
    // Close while the confirm is held; it comes a little later (the cancel is answered at once).
    const close = () => closeThenRelease(consumer, order, () => proxy.release());
    return { queue, connection, channel, order, close };
  }

  it('resolves only once a dead letter given up on has been confirmed and reported', async () => {
    // Arrange
    const run = await heldConsumer('close-late-letter', 1);

    // Act
    const closed = await run.close();

    // Assert: reported before close() resolved, and its original acked by then: closing the channel
    // right away (its close is written after the ack, on the same channel) gives nothing back.
    expect(closed).toBe(true);
    expect(run.order).toEqual(['given up: dead_letter', 'dead letter', 'closed']);
    await run.channel.close().catch(() => {});
    await run.connection.close().catch(() => {});
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(await queues.count(run.queue)).toBe(0);
    expect(await queues.count(`${run.queue}.dlq`)).toBe(1);
    expect(await queues.count(`${run.queue}.retry`)).toBe(0);
  });

  it('resolves only once a retry copy given up on has been confirmed and its original acked', async () => {
    // Arrange
    const run = await heldConsumer('close-late-retry', 5);

    // Act
    const closed = await run.close();

    // Assert: the original was acked before close() resolved: closing the channel right away gives
    // nothing back, and the copy alone comes back after its delay.
    expect(closed).toBe(true);
    expect(run.order).toEqual(['given up: retry', 'closed']);
    await run.channel.close().catch(() => {});
    await run.connection.close().catch(() => {});
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(await queues.count(run.queue)).toBe(0);
    expect(await queues.count(`${run.queue}.retry`)).toBe(1);
  });
});
