/**
 * A burst on a real RabbitMQ with `concurrency` below `prefetch`: the broker pushes the whole prefetch, and
 * the consumer still never runs more than `concurrency` handlers at once; every message is handled once.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { memoryStore } from '../../../src/index.js';
import { AmqpQueues, waitUntil } from '../../helpers/amqp-queues.js';
import { env, requireService } from '../../helpers/env.js';

describe('amqp consumer: a burst with concurrency below the prefetch', () => {
  const queues = new AmqpQueues();

  beforeAll(async () => {
    await requireService('RabbitMQ', env.amqpUrl);
    await queues.open();
  });
  afterAll(() => queues.close());

  it('never runs more than `concurrency` handlers at once, and handles every message once', async () => {
    // Arrange: 60 messages ready before the consumer starts, so RabbitMQ pushes a full prefetch at once.
    const queue = await queues.queue('burst-gated');
    for (let i = 0; i < 60; i++) {
      queues.channel.sendToQueue(queue, Buffer.from('work'), { messageId: `order-${i}` });
    }
    await queues.channel.waitForConfirms();
    let running = 0;
    let most = 0;
    const handled = new Map<string, number>();
    let executed = 0;
    // Act
    await queues.start(
      async (message) => {
        running++;
        most = Math.max(most, running);
        await sleep(10);
        const id = String(message.properties.messageId);
        handled.set(id, (handled.get(id) ?? 0) + 1);
        running--;
      },
      {
        queue,
        name: queue,
        idempotency: { store: memoryStore() },
        concurrency: 3,
        prefetch: 30,
        hooks: { onExecuted: () => void executed++ },
      },
    );
    await waitUntil('60 executions', () => executed === 60);
    // Assert
    expect(most).toBe(3);
    expect(handled.size).toBe(60);
    expect([...handled.values()].every((calls) => calls === 1)).toBe(true);
    await waitUntil('an empty queue', async () => (await queues.count(queue)) === 0);
  });
});
