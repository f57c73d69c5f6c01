/**
 * The JetStream consumer (or its stream) deleted while the idempotent consumer runs: `done` resolves and
 * `hooks.onConsumerError` reports why, instead of the iterator retrying in silence forever.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createIdempotency, memoryStore } from '../../../src/index.js';
import { idempotentConsumer, type NatsConsumer } from '../../../src/nats/index.js';
import { type NatsFixture, natsFixture, until } from './setup.js';

describe('NATS consumer: the JetStream consumer deleted', () => {
  let f: NatsFixture | undefined;
  let running: NatsConsumer | undefined;

  afterEach(async () => {
    await running?.close();
    await f?.destroy();
    running = undefined;
    f = undefined;
  });

  async function start(fixture: NatsFixture) {
    const handled: string[] = [];
    const errors: Array<{ consumer: string; operation: string; error: unknown }> = [];
    running = await idempotentConsumer(
      await fixture.js.consumers.get(fixture.stream, fixture.durable),
      (message) => {
        handled.push(message.headers?.get('Nats-Msg-Id') ?? '');
      },
      {
        name: fixture.stream,
        idempotency: createIdempotency({ store: memoryStore() }),
        hooks: { onConsumerError: (event) => errors.push(event) },
      },
    );
    let state = 'pending';
    running.done.then(
      () => {
        state = 'resolved';
      },
      () => {
        state = 'rejected';
      },
    );
    await fixture.publish('a');
    await until('the first message', () => handled.length === 1);
    return { errors, state: () => state };
  }

  for (const what of ['consumer', 'stream'] as const) {
    it(`resolves done and reports the error when the ${what} is deleted`, async () => {
      // Arrange
      f = await natsFixture(`deleted-${what}`);
      const { errors, state } = await start(f);
      // Act
      if (what === 'consumer') await f.jsm.consumers.delete(f.stream, f.durable);
      else await f.jsm.streams.delete(f.stream);
      await until('done', () => state() !== 'pending', 5000);
      // Assert
      expect(state()).toBe('resolved');
      expect(errors).toHaveLength(1);
      expect(errors[0]).toMatchObject({ consumer: f.stream, operation: 'consume' });
      expect(errors[0]?.error).toBeInstanceOf(Error);
      expect(await running?.close()).toBe(true);
    });
  }

  it('notices a consumer deleted while every handler slot is stuck and no pull is open', async () => {
    // Arrange: one slot, held by a handler that never settles; two more messages arrive and wait for it,
    // which fills what the loop asks for ahead: no pull stays open.
    f = await natsFixture('deleted-stuck', 1500);
    const errors: Array<{ operation: string; error: unknown }> = [];
    let started = 0;
    running = await idempotentConsumer(
      await f.js.consumers.get(f.stream, f.durable),
      () => {
        started++;
        return new Promise<void>(() => {});
      },
      {
        name: f.stream,
        idempotency: createIdempotency({ store: memoryStore() }),
        concurrency: 1,
        drainTimeout: '100ms',
        hooks: { onConsumerError: (event) => errors.push(event) },
      },
    );
    let ended = false;
    void running.done.then(() => {
      ended = true;
    });
    for (const id of ['a', 'b', 'c']) await f.publish(id);
    await until('the stuck handler', () => started === 1);
    await new Promise((resolve) => setTimeout(resolve, 700));
    // Act
    await f.jsm.consumers.delete(f.stream, f.durable);
    // Assert: within a few checks (one per touch interval, 500 ms here), not once a slot frees (never).
    await until('done', () => ended, 3000);
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatchObject({ operation: 'consume' });
    expect(String(errors[0]?.error)).toMatch(/consumer not found/i);
    expect(started).toBe(1);
  });
});
