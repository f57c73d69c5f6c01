/**
 * The NATS connection of a running idempotent consumer closed under it (the application's `nc.close()`, or
 * the client giving up reconnecting during an outage): the message loop ends, and that must be reported,
 * not only resolve `done`; a service alerting on `onConsumerError` would otherwise run on, receiving
 * nothing, with nothing said.
 */
import { jetstream } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterEach, describe, expect, it } from 'vitest';
import { createIdempotency, memoryStore } from '../../../src/index.js';
import { idempotentConsumer, type NatsConsumer } from '../../../src/nats/index.js';
import { env } from '../../helpers/env.js';
import { type NatsFixture, natsFixture, until } from './setup.js';

describe('NATS consumer: its connection closed', () => {
  let f: NatsFixture | undefined;
  let nc: NatsConnection | undefined;
  let running: NatsConsumer | undefined;

  afterEach(async () => {
    await running?.close();
    if (nc !== undefined && !nc.isClosed()) await nc.close();
    await f?.destroy();
  });

  it('resolves done and reports `consume` when the connection closes without close()', async () => {
    // Arrange
    f = await natsFixture('conn-closed');
    nc = await connect({ servers: env.natsUrl });
    const handled: string[] = [];
    const errors: Array<{ operation: string; error: unknown }> = [];
    running = await idempotentConsumer(
      await jetstream(nc).consumers.get(f.stream, f.durable),
      (message) => void handled.push(message.headers?.get('Nats-Msg-Id') ?? ''),
      {
        name: f.stream,
        idempotency: createIdempotency({ store: memoryStore() }),
        hooks: { onConsumerError: (event) => void errors.push(event) },
      },
    );
    let ended = false;
    void running.done.then(() => {
      ended = true;
    });
    await f.publish('a');
    await until('the first message', () => handled.length === 1);
    // Act
    await nc.close();
    await until('done', () => ended);
    // Assert
    expect(errors).toHaveLength(1);
    expect(errors[0]?.operation).toBe('consume');
    expect(String((errors[0]?.error as Error | undefined)?.message)).toContain('connection closed');
  });

  it('ends at once with every slot busy and messages waiting, and reports the ack it cannot send', async () => {
    // Arrange: one slot held by m1; m2 and m3, pulled ahead, wait for it (no pull open); AckWait 1 s.
    f = await natsFixture('conn-closed-waiting', 1000);
    nc = await connect({ servers: env.natsUrl });
    const started: string[] = [];
    const executed: string[] = [];
    const failedReplies: string[] = [];
    const errors: Array<{ operation: string; error: unknown }> = [];
    let release = () => {};
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    running = await idempotentConsumer(
      await jetstream(nc).consumers.get(f.stream, f.durable),
      async (_message, context) => {
        started.push(context.key);
        if (context.key === 'm1') await held;
      },
      {
        name: f.stream,
        idempotency: createIdempotency({ store: memoryStore() }),
        concurrency: 1,
        hooks: {
          onConsumerError: (event) => void errors.push(event),
          onExecuted: (event) => void executed.push(String(event.key)),
          onBrokerError: (event) => void failedReplies.push(`${event.operation} ${event.key}`),
        },
      },
    );
    let endedAt: number | undefined;
    void running.done.then(() => {
      endedAt = performance.now();
    });
    for (const id of ['m1', 'm2', 'm3']) await f.publish(id);
    await until('m1 to start', () => started.length === 1);
    await new Promise((resolve) => setTimeout(resolve, 300)); // m2 and m3 arrive and wait
    // Act
    const closedAt = performance.now();
    await nc.close();
    await until('done', () => endedAt !== undefined, 3000);
    release();
    await until('the ack of m1 to fail', () => failedReplies.includes('ack m1'));
    // Assert: the loop ended within about one working() interval (333 ms), not once m1's handler was
    // released; the waiting messages never started; m1's ack, which the client would have dropped in
    // silence, is reported, and m1 is not reported executed (the server redelivers it after AckWait).
    expect((endedAt ?? Infinity) - closedAt).toBeLessThan(1500);
    expect(errors.map((event) => event.operation)).toEqual(['consume']);
    expect(String((errors[0]?.error as Error | undefined)?.message)).toContain('connection closed');
    expect(started).toEqual(['m1']);
    expect(executed).toEqual([]);
    const info = await f.jsm.consumers.info(f.stream, f.durable);
    expect(info.num_ack_pending + info.num_pending).toBe(3);
  });

  it('ends within one interval with the slots stuck and nothing waiting (no pull open)', async () => {
    // Arrange: one slot held for good by m1; m2 waits for it, and is handed back after nine working()
    // intervals (3 s with AckWait 1 s): the slots look stuck, so the loop closes its pulls and asks for
    // nothing more. No pull is open and no message waits here.
    f = await natsFixture('conn-closed-stuck', 1000);
    nc = await connect({ servers: env.natsUrl });
    const started: string[] = [];
    const errors: Array<{ operation: string; error: unknown }> = [];
    running = await idempotentConsumer(
      await jetstream(nc).consumers.get(f.stream, f.durable),
      (_message, context) => {
        started.push(context.key);
        return new Promise<void>(() => {});
      },
      {
        name: f.stream,
        idempotency: createIdempotency({ store: memoryStore() }),
        concurrency: 1,
        drainTimeout: '100ms',
        hooks: { onConsumerError: (event) => void errors.push(event) },
      },
    );
    let endedAt: number | undefined;
    void running.done.then(() => {
      endedAt = performance.now();
    });
    for (const id of ['m1', 'm2']) await f.publish(id);
    await until('m1 to start', () => started.length === 1);
    // m2 is handed back after nine intervals of 333 ms (3 s), and the loop then stays with no pull open.
    await new Promise((resolve) => setTimeout(resolve, 4500));
    // Act
    const closedAt = performance.now();
    await nc.close();
    await until('done', () => endedAt !== undefined, 3000);
    // Assert: within about one working() interval (333 ms), not once m1's handler settles (never).
    expect((endedAt ?? Infinity) - closedAt).toBeLessThan(1500);
    expect(errors.map((event) => event.operation)).toEqual(['consume']);
    expect(String((errors[0]?.error as Error | undefined)?.message)).toContain('connection closed');
    expect(started).toEqual(['m1']);
  });

  it('reports nothing when close() ends the loop', async () => {
    // Arrange
    f = await natsFixture('conn-close-call');
    nc = await connect({ servers: env.natsUrl });
    const errors: unknown[] = [];
    running = await idempotentConsumer(
      await jetstream(nc).consumers.get(f.stream, f.durable),
      () => {},
      {
        name: f.stream,
        idempotency: createIdempotency({ store: memoryStore() }),
        hooks: { onConsumerError: (event) => void errors.push(event) },
      },
    );
    // Act
    expect(await running.close()).toBe(true);
    await running.done;
    await nc.close();
    // Assert
    expect(errors).toEqual([]);
  });
});
