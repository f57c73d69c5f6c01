/**
 * `close()` of the RabbitMQ consumer against a fake channel whose cancel the test answers when it chooses:
 * a delivery the broker still sends after `close()` was called is handed back (`nack`, requeued), never
 * started, and a cancel the broker never answers (a network partition) counts against `drainTimeout`.
 */
import { describe, expect, it } from 'vitest';
import { idempotentConsumer } from '../../../src/amqp/index.js';
import { createIdempotency, type Duration, memoryStore } from '../../../src/index.js';
import { fakeChannel, message } from './fake-channel.js';

async function startConsumer(drainTimeout: Duration) {
  const fake = fakeChannel();
  const handled: number[] = [];
  const consumer = await idempotentConsumer(
    fake.channel,
    (m) => void handled.push(m.fields.deliveryTag),
    {
      queue: 'q',
      name: 'closing',
      idempotency: createIdempotency({ store: memoryStore() }),
      drainTimeout,
    },
  );
  return { ...fake, consumer, handled };
}

const tick = () => new Promise((resolve) => setTimeout(resolve, 20));

describe('amqp consumer: close() and the broker', () => {
  it('hands back, never starts, a message delivered after close() was called', async () => {
    // Arrange
    const { consumer, control, handled, acked, nacked } = await startConsumer('2s');
    control.deliver(message(1));
    await tick();
    // Act: close() waits for the cancel-ok; the broker sends one more message before it.
    const closing = consumer.close();
    control.deliver(message(2));
    await tick();
    const beforeCancel = [...nacked];
    control.answerCancel();
    const closed = await closing;
    await tick();
    // Assert: handed back once the broker took the cancel in. Before, at once: the broker could give it
    // straight back to this consumer, still registered, which handed it back again, each time one more
    // `x-delivery-count` on a quorum queue.
    expect(closed).toBe(true);
    expect(handled).toEqual([1]);
    expect(acked).toEqual([1]);
    expect(beforeCancel).toEqual([]);
    expect(nacked).toEqual([{ tag: 2, requeue: true }]);
  });

  it('resolves false within drainTimeout when the broker never answers the cancel', async () => {
    // Arrange
    const { consumer } = await startConsumer('100ms');
    // Act
    const started = performance.now();
    const closed = await Promise.race([
      consumer.close(),
      new Promise((resolve) => setTimeout(() => resolve('hung'), 3000)),
    ]);
    // Assert
    expect(closed).toBe(false);
    expect(performance.now() - started).toBeLessThan(1000);
  });
});
