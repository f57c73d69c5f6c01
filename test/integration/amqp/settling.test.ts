/**
 * Deliveries the RabbitMQ consumer must always settle, dead letters replayed to the queue, and options
 * refused before anything is declared.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idempotentConsumer } from '../../../src/amqp/index.js';
import { isInvalidOptionsError, memoryStore } from '../../../src/index.js';
import { AmqpQueues, waitUntil } from '../../helpers/amqp-queues.js';
import { env, requireService } from '../../helpers/env.js';

describe('amqp consumer: settling and options', () => {
  const queues = new AmqpQueues();

  beforeAll(async () => {
    await requireService('RabbitMQ', env.amqpUrl);
    await queues.open();
  });
  afterAll(() => queues.close());

  it('dead-letters a thrown value String() cannot convert, and goes on with the next message (prefetch 1)', async () => {
    // Arrange
    const queue = await queues.queue('unprintable');
    let calls = 0;
    await queues.start(
      () => {
        calls++;
        throw Object.assign(Object.create(null), { code: 'E_DECLINED', message: 'declined' });
      },
      { queue, name: queue, idempotency: { store: memoryStore() }, maxDeliveries: 1, prefetch: 1 },
    );
    // Act
    await queues.publish(queue, 'a', { messageId: 'k1' });
    await queues.publish(queue, 'b', { messageId: 'k2' });
    await waitUntil('both dead letters', async () => (await queues.count(`${queue}.dlq`)) === 2);
    // Assert
    expect(calls).toBe(2);
    const letters = await queues.drain(`${queue}.dlq`);
    expect(letters.map((letter) => letter.properties.headers?.['x-idempotency-error'])).toEqual([
      '{"name":"NonError","message":"{\\"code\\":\\"E_DECLINED\\",\\"message\\":\\"declined\\"}","code":"E_DECLINED"}',
      '{"name":"NonError","message":"{\\"code\\":\\"E_DECLINED\\",\\"message\\":\\"declined\\"}","code":"E_DECLINED"}',
    ]);
  });

  it('gives a dead letter replayed to the queue its full deliveries again', async () => {
    // Arrange
    const queue = await queues.queue('replay');
    let down = true;
    const deliveries: Array<{ down: boolean; count: number }> = [];
    let executed = 0;
    await queues.start(
      (_message, context) => {
        deliveries.push({ down, count: context.deliveryCount });
        // While down every delivery fails; after the replay, only the first one.
        if (down || deliveries.filter((d) => !d.down).length === 1) throw new Error('timeout');
      },
      {
        queue,
        name: queue,
        idempotency: { store: memoryStore() },
        maxDeliveries: 3,
        backoff: { initial: 50, jitter: false },
        hooks: { onExecuted: () => void executed++ },
      },
    );
    await queues.publish(queue, 'pay', { messageId: 'pay-7' });
    await waitUntil('the dead letter', async () => (await queues.count(`${queue}.dlq`)) === 1);
    const [letter] = await queues.drain(`${queue}.dlq`);
    // Act: the usual shovel, same body, id and headers.
    down = false;
    await queues.publish(queue, 'pay', {
      messageId: letter?.properties.messageId,
      headers: letter?.properties.headers,
    });
    await waitUntil('the replayed message to run', () => executed === 1);
    // Assert
    expect(letter?.properties.headers?.['x-idempotency-deliveries']).toBeUndefined();
    expect(letter?.properties.headers?.['x-idempotency-dead-letter-deliveries']).toBe(3);
    expect(deliveries.filter((d) => !d.down).map((d) => d.count)).toEqual([1, 2]);
    expect(await queues.count(`${queue}.dlq`)).toBe(0);
  });

  it('refuses a prefetch over 65535 up front, leaving the channel usable', async () => {
    // Arrange
    const queue = await queues.queue('prefetch');
    const { channel } = await queues.consumerChannel();
    // Act
    const refused = await idempotentConsumer(channel, () => {}, {
      queue,
      name: queue,
      idempotency: { store: memoryStore() },
      prefetch: 70_000,
    }).catch((error: unknown) => error);
    // Assert
    expect(isInvalidOptionsError(refused)).toBe(true);
    await expect(channel.checkQueue(queue)).resolves.toMatchObject({ queue });
  });

  it('refuses a retry or dead-letter queue that is the consumed queue', async () => {
    // Arrange
    const queue = await queues.queue('same-queue');
    const { channel } = await queues.consumerChannel();
    const base = { queue, name: queue, idempotency: { store: memoryStore() }, declare: false };
    // Act
    const refusals = await Promise.all(
      [{ retryQueue: queue }, { deadLetterQueue: queue }].map((names) =>
        idempotentConsumer(channel, () => {}, { ...base, ...names }).catch((e: unknown) => e),
      ),
    );
    // Assert
    expect(refusals.map(isInvalidOptionsError)).toEqual([true, true]);
  });

  it('declares no retry or dead-letter queue for a queue that does not exist', async () => {
    // Arrange
    const queue = `${await queues.queue('missing')}-nope`;
    queues.forget(queue, `${queue}.retry`, `${queue}.dlq`);
    const { channel } = await queues.consumerChannel();
    // Act
    const failed = await idempotentConsumer(channel, () => {}, {
      queue,
      name: queue,
      idempotency: { store: memoryStore() },
    }).catch((error: unknown) => error);
    // Assert
    expect(String((failed as Error).message)).toMatch(/NOT_FOUND/);
    for (const name of [`${queue}.retry`, `${queue}.dlq`]) {
      const { channel: probe } = await queues.consumerChannel();
      await expect(probe.checkQueue(name)).rejects.toThrow(/NOT_FOUND/);
    }
  });
});
