/**
 * Handlers at once on the RabbitMQ consumer when the application sets `concurrency` below `prefetch`:
 * RabbitMQ pushes `prefetch` messages, and no more than `concurrency` handlers may run (a database pool,
 * a payment gateway's rate limit); the rest wait their turn, and close() hands them back unstarted.
 */
import { describe, expect, it } from 'vitest';
import { idempotentConsumer } from '../../../src/amqp/index.js';
import { createIdempotency, memoryStore } from '../../../src/index.js';
import { deferred } from '../../helpers/deferred.js';
import { fakeChannel, message } from './fake-channel.js';

const tick = () => new Promise((resolve) => setTimeout(resolve, 20));

async function startGated() {
  const fake = fakeChannel();
  const gate = deferred();
  const state = { running: 0, most: 0, handled: [] as number[] };
  const consumer = await idempotentConsumer(
    fake.channel,
    async (m) => {
      state.running++;
      state.most = Math.max(state.most, state.running);
      await gate.promise;
      state.handled.push(m.fields.deliveryTag);
      state.running--;
    },
    {
      queue: 'q',
      name: 'gated',
      idempotency: createIdempotency({ store: memoryStore() }),
      concurrency: 2,
      prefetch: 10,
      drainTimeout: '2s',
    },
  );
  return { ...fake, consumer, gate, state };
}

describe('amqp consumer: concurrency below the prefetch', () => {
  it('runs no more than `concurrency` handlers at once, then every message in turn', async () => {
    // Arrange
    const { control, gate, state, acked } = await startGated();
    // Act: RabbitMQ pushes a whole prefetch at once.
    for (let tag = 1; tag <= 10; tag++) control.deliver(message(tag));
    await tick();
    // Assert
    expect(state.running).toBe(2);
    gate.resolve();
    for (let i = 0; i < 50 && state.handled.length < 10; i++) await tick();
    expect(state.most).toBe(2);
    expect(state.handled.sort((a, b) => a - b)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    expect([...acked].sort((a, b) => a - b)).toEqual(state.handled);
  });

  it('hands back, unstarted, the messages still waiting for a slot on close()', async () => {
    // Arrange
    const { consumer, control, gate, state, nacked } = await startGated();
    for (let tag = 1; tag <= 5; tag++) control.deliver(message(tag));
    await tick();
    // Act
    const closing = consumer.close();
    await tick();
    const beforeCancel = [...nacked];
    control.answerCancel();
    gate.resolve();
    const closed = await closing;
    // Assert: once the broker took the cancel in. Before, at once: the broker gave each one straight back
    // to the closing consumer, which handed it back again (each time counted on a quorum queue).
    expect(closed).toBe(true);
    expect(beforeCancel).toEqual([]);
    expect(state.handled.sort()).toEqual([1, 2]);
    expect(nacked).toEqual([3, 4, 5].map((tag) => ({ tag, requeue: true })));
  });
});
