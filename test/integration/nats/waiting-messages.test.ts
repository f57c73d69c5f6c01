/**
 * Messages waiting for a handler slot must not be redelivered by JetStream behind the consumer's back. With
 * every slot busy for longer than `ack_wait`, messages the client had already pulled waited in the process
 * with no `working()`: JetStream redelivered each one (to another consumer, or as a second copy here),
 * counting a delivery against `maxDeliveries` every time. The consumer now keeps what it pulls ahead of its
 * slots in a local queue, each message kept alive with `working()` until a slot frees up.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIdempotency, memoryStore } from '../../../src/index.js';
import { idempotentConsumer } from '../../../src/nats/index.js';
import { type NatsFixture, natsFixture, until } from './setup.js';

describe('NATS consumer: messages waiting for a handler slot', () => {
  let f: NatsFixture;

  beforeAll(async () => {
    // An AckWait far shorter than the handlers: only working() keeps a message from being redelivered.
    f = await natsFixture('waiting', 1000);
  });

  afterAll(async () => {
    await f?.destroy();
  });

  it('gets no message redelivered while it waits, however long the slots stay busy', async () => {
    // Arrange: two slots, each handler 2.5 s (2.5 AckWaits), six messages.
    const deliveries: string[] = [];
    const settled: string[] = [];
    const running = await idempotentConsumer(
      await f.js.consumers.get(f.stream, f.durable),
      async (_message, context) => {
        deliveries.push(`${context.key}#${context.deliveryCount}`);
        await new Promise((resolve) => setTimeout(resolve, 2500));
      },
      {
        name: f.stream,
        idempotency: createIdempotency({ store: memoryStore() }),
        concurrency: 2,
        hooks: {
          onExecuted: (event) => settled.push(`executed ${event.key}#${event.deliveryCount}`),
          onDuplicate: (event) => settled.push(`duplicate ${event.key}#${event.deliveryCount}`),
          onRetry: (event) => settled.push(`retry ${event.key}#${event.deliveryCount}`),
        },
      },
    );
    // Act
    for (const id of ['m1', 'm2', 'm3', 'm4', 'm5', 'm6']) await f.publish(id);
    await until('six messages executed', () => settled.length >= 6, 15_000);
    await new Promise((resolve) => setTimeout(resolve, 300)); // a late copy would show here
    await running.close();
    // Assert: each message delivered once, executed once, never a second copy.
    expect([...deliveries].sort()).toEqual(['m1#1', 'm2#1', 'm3#1', 'm4#1', 'm5#1', 'm6#1']);
    expect([...settled].sort()).toEqual([
      'executed m1#1',
      'executed m2#1',
      'executed m3#1',
      'executed m4#1',
      'executed m5#1',
      'executed m6#1',
    ]);
    const info = await f.jsm.consumers.info(f.stream, f.durable);
    expect(info.num_redelivered).toBe(0);
    expect(info.delivered.consumer_seq).toBe(6);
  });

  it('gets no message redelivered that waited in the local queue for longer than ack_wait', async () => {
    // Arrange: one slot, held 2 s (two AckWaits) by m1; m2 is pulled ahead of the slot.
    const w = await natsFixture('queued', 1000);
    try {
      const deliveries: string[] = [];
      const running = await idempotentConsumer(
        await w.js.consumers.get(w.stream, w.durable),
        async (_message, context) => {
          deliveries.push(`${context.key}#${context.deliveryCount}`);
          if (context.key === 'm1') await new Promise((resolve) => setTimeout(resolve, 2000));
        },
        {
          name: w.stream,
          idempotency: createIdempotency({ store: memoryStore() }),
          concurrency: 1,
        },
      );
      // Act
      await w.publish('m1');
      await w.publish('m2');
      await until('m1 started', () => deliveries.length === 1);
      await new Promise((resolve) => setTimeout(resolve, 300));
      // m2 was delivered to this process (ack pending, none left on the server) and waits here.
      const waiting = await w.jsm.consumers.info(w.stream, w.durable);
      await until('m2 executed', () => deliveries.length >= 2, 10_000);
      await new Promise((resolve) => setTimeout(resolve, 300)); // a late copy would show here
      await running.close();
      // Assert
      expect(waiting.num_ack_pending).toBe(2);
      expect(waiting.num_pending).toBe(0);
      expect(deliveries).toEqual(['m1#1', 'm2#1']);
      const info = await w.jsm.consumers.info(w.stream, w.durable);
      expect(info.num_redelivered).toBe(0);
      expect(info.delivered.consumer_seq).toBe(2);
      expect(info.num_ack_pending).toBe(0);
    } finally {
      await w.destroy();
    }
  });
});
