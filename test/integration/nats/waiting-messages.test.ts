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
import type { Store } from '../../../src/store/store.js';
import { type NatsFixture, natsFixture, until } from './setup.js';

/**
 * Consumer A on `w`'s stream and `store`: one slot, held by m1 until `release()`, and m2, published after
 * it, pulled and waiting behind it. Two deliveries allowed; `close()` gives up on m1 after 100 ms.
 */
async function holdingM1WithM2Waiting(w: NatsFixture, store: Store) {
  const startedA: string[] = [];
  let release = () => {};
  const held = new Promise<void>((resolve) => {
    release = resolve;
  });
  const a = await idempotentConsumer(
    await w.js.consumers.get(w.stream, w.durable),
    async (_message, context) => {
      startedA.push(`${context.key}#${context.deliveryCount}`);
      await held;
    },
    {
      name: w.stream,
      idempotency: createIdempotency({ store }),
      concurrency: 1,
      maxDeliveries: 2,
      drainTimeout: '100ms',
    },
  );
  await w.publish('m1');
  await w.publish('m2');
  await until('m1 started in A', () => startedA.length === 1);
  await new Promise((resolve) => setTimeout(resolve, 300)); // m2 waits in A
  return { a, startedA, release };
}

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

  it('does not count a delivery handed back from behind stuck slots against maxDeliveries', async () => {
    // Arrange: consumer A, one slot held by m1 for the whole test; m2 waits behind it, and after nine
    // working() intervals (3 s at AckWait 1 s) is handed back. Consumer B, on the same store, then gets
    // m2 (delivery 2), whose handler fails once and then succeeds; two deliveries allowed.
    const w = await natsFixture('handed-back', 1000);
    try {
      const store = memoryStore();
      const { a, startedA, release } = await holdingM1WithM2Waiting(w, store);
      const runsB: string[] = [];
      const outcome: string[] = [];
      const b = await idempotentConsumer(
        await w.js.consumers.get(w.stream, w.durable),
        (_message, context) => {
          runsB.push(`${context.key}#${context.deliveryCount}`);
          if (runsB.length === 1) throw new Error('payment gateway timeout');
        },
        {
          name: w.stream,
          idempotency: createIdempotency({ store }),
          maxDeliveries: 2,
          backoff: () => 50,
          hooks: {
            onExecuted: (event) =>
              void outcome.push(`executed ${event.key}#${event.deliveryCount}`),
            onDeadLetter: (event) =>
              void outcome.push(`dead-lettered ${event.key}#${event.deliveryCount}`),
          },
        },
      );
      // Act
      await until('m2 settled in B', () => outcome.length >= 1, 10_000);
      release();
      await b.close();
      await a.close();
      // Assert: the hand-back (delivery 1, never run) left m2 its two runs, the second one succeeding.
      expect(startedA).toEqual(['m1#1']);
      expect(runsB).toEqual(['m2#2', 'm2#3']);
      expect(outcome).toEqual(['executed m2#3']);
    } finally {
      await w.destroy();
    }
  });

  it('dead-letters a failure on the last delivery max_deliver allows, a hand-back before it notwithstanding', async () => {
    // Arrange: as above, with max_deliver 2 = maxDeliveries: m2 is handed back from behind A's stuck slot
    // (delivery 1, recorded), then fails in B on delivery 2, the server's last. Crediting the hand-back
    // would ask for a retry the server never makes (it drops the message): dead-lettered instead.
    const w = await natsFixture('last-delivery', 1000, 2);
    try {
      const store = memoryStore();
      const { a, startedA, release } = await holdingM1WithM2Waiting(w, store);
      const runsB: string[] = [];
      const outcome: string[] = [];
      const b = await idempotentConsumer(
        await w.js.consumers.get(w.stream, w.durable),
        (_message, context) => {
          runsB.push(`${context.key}#${context.deliveryCount}`);
          throw new Error('card declined');
        },
        {
          name: w.stream,
          idempotency: createIdempotency({ store }),
          maxDeliveries: 2,
          backoff: () => 50,
          hooks: {
            onRetry: (event) => void outcome.push(`retry ${event.key}#${event.deliveryCount}`),
            onDeadLetter: (event) =>
              void outcome.push(`dead-lettered ${event.key}#${event.deliveryCount}`),
          },
        },
      );
      // Act
      await until('m2 settled in B', () => outcome.length >= 1, 10_000);
      release();
      await b.close();
      await a.close();
      // Assert
      expect(startedA).toEqual(['m1#1']);
      expect(runsB).toEqual(['m2#2']);
      expect(outcome).toEqual(['dead-lettered m2#2']);
    } finally {
      await w.destroy();
    }
  });

  it('records the deliveries close() hands back, so that they do not count against maxDeliveries', async () => {
    // Arrange: consumer A, one slot held by m1; m2 waits behind it until A.close() hands it back (a
    // deploy). The record is what keeps that delivery, never run, from counting against maxDeliveries
    // where the server counts the redelivery (nats-server 2.9 happens to redeliver it as delivery 1).
    const w = await natsFixture('closed-back', 1000);
    try {
      const store = memoryStore();
      const { a, startedA, release } = await holdingM1WithM2Waiting(w, store);
      // Act
      await a.close();
      const records = await store.stats!();
      release();
      // Assert: m1 still held (in progress); m2's hand-back recorded before close() resolved.
      expect(startedA).toEqual(['m1#1']);
      expect(records).toMatchObject({ inProgress: 1, completed: 1 });
    } finally {
      await w.destroy();
    }
  });

  it('runs each effect once when the server forgets the messages waiting here (consumer deleted and re-created)', async () => {
    // Arrange: one slot held by m1; m2 and m3 wait behind it, kept alive with working(). Then the
    // JetStream consumer is deleted: working() on its messages goes nowhere, and no error says so (the
    // reply gets no answer), so the waiting messages still start here once the slot frees, and their acks
    // are lost with the consumer.
    const w = await natsFixture('forgotten', 1000);
    try {
      const store = memoryStore();
      const runs: string[] = [];
      const settledB: string[] = [];
      let release = () => {};
      const held = new Promise<void>((resolve) => {
        release = resolve;
      });
      const handler = async (
        _message: unknown,
        context: { key: string; deliveryCount: number },
      ) => {
        runs.push(context.key);
        if (context.key === 'm1') await held;
      };
      const a = await idempotentConsumer(await w.js.consumers.get(w.stream, w.durable), handler, {
        name: w.stream,
        idempotency: createIdempotency({ store }),
        concurrency: 1,
        drainTimeout: '100ms',
      });
      for (const id of ['m1', 'm2', 'm3']) await w.publish(id);
      await until('m1 to start', () => runs.length === 1);
      await new Promise((resolve) => setTimeout(resolve, 300)); // m2 and m3 wait here
      const config = (await w.jsm.consumers.info(w.stream, w.durable)).config;
      await w.jsm.consumers.delete(w.stream, w.durable);
      release();
      await until('m2 and m3 to run in A', () => runs.length === 3);
      await a.close();
      // Act: the consumer is re-created; the server delivers all three again, from the start.
      await w.jsm.consumers.add(w.stream, config);
      const b = await idempotentConsumer(await w.js.consumers.get(w.stream, w.durable), handler, {
        name: w.stream,
        idempotency: createIdempotency({ store }),
        hooks: {
          onExecuted: (event) => void settledB.push(`executed ${event.key}`),
          onDuplicate: (event) => void settledB.push(`duplicate ${event.key}`),
        },
      });
      await until('three settled in B', () => settledB.length >= 3, 10_000);
      await new Promise((resolve) => setTimeout(resolve, 300));
      await b.close();
      // Assert: every handler ran once; the copies the server delivered again were acked as duplicates.
      expect(runs).toEqual(['m1', 'm2', 'm3']);
      expect([...settledB].sort()).toEqual(['duplicate m1', 'duplicate m2', 'duplicate m3']);
      expect((await w.jsm.consumers.info(w.stream, w.durable)).num_ack_pending).toBe(0);
    } finally {
      await w.destroy();
    }
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
