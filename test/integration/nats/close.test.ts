/**
 * `close()` of the NATS consumer while every slot is busy and another message was already pulled: it must
 * resolve within `drainTimeout` (false, a handler still running), and the waiting message must never start
 * after `close()`; it is handed back for redelivery instead.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIdempotency, memoryStore } from '../../../src/index.js';
import { idempotentConsumer } from '../../../src/nats/index.js';
import { type NatsFixture, natsFixture, until } from './setup.js';

describe('NATS consumer: close() with every slot busy', () => {
  let f: NatsFixture;

  beforeAll(async () => {
    f = await natsFixture('close');
  });

  afterAll(async () => {
    await f?.destroy();
  });

  it('resolves false within drainTimeout and starts no message after close()', async () => {
    // Arrange: one slot, held by a handler that outlives the drain timeout; a second message waits.
    const started: string[] = [];
    let release = () => {};
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    const running = await idempotentConsumer(
      await f.js.consumers.get(f.stream, f.durable),
      async (message) => {
        started.push(message.headers?.get('Nats-Msg-Id') ?? '');
        await held;
      },
      {
        name: f.stream,
        idempotency: createIdempotency({ store: memoryStore() }),
        concurrency: 1,
        drainTimeout: '500ms',
      },
    );
    await f.publish('m1');
    await f.publish('m2');
    await until('the first handler', () => started.length === 1);
    await new Promise((resolve) => setTimeout(resolve, 200)); // m2 is pulled and waits for the slot
    // Act
    const begun = performance.now();
    const closed = await Promise.race([
      running.close(),
      new Promise((resolve) => setTimeout(() => resolve('hung'), 5000)),
    ]);
    const elapsed = performance.now() - begun;
    release();
    await running.done;
    await new Promise((resolve) => setTimeout(resolve, 200));
    // Assert
    expect(closed).toBe(false);
    expect(elapsed).toBeLessThan(1500);
    expect(started).toEqual(['m1']);
    // m2 was handed back (nak), not held until AckWait (5 s): the next consumer gets it at once.
    const next: string[] = [];
    const again = await idempotentConsumer(
      await f.js.consumers.get(f.stream, f.durable),
      (message) => {
        next.push(message.headers?.get('Nats-Msg-Id') ?? '');
      },
      { name: `${f.stream}-next`, idempotency: createIdempotency({ store: memoryStore() }) },
    );
    await until('the redelivery of m2', () => next.includes('m2'), 2500);
    await again.close();
  });
});
