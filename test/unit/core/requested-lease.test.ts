/**
 * A lease the handler asked for with `ctx.extendLease(ms)`, longer than the engine's `leaseMs`, against
 * the automatic heartbeat (scenario in test/helpers/requested-lease.ts), on the memory store. The
 * heartbeat extended by the engine's lease, so its next beat cut the asked-for end back: a handler that
 * then blocked the event loop was taken over by another process while it still ran.
 */
import { describe, expect, it } from 'vitest';
import { createIdempotency, memoryStore } from '../../../src/index.js';
import { runPastDefaultLease } from '../../helpers/requested-lease.js';

describe('a lease the handler extended past leaseMs', () => {
  it('is never cut back by a heartbeat, so another process cannot take the key over', async () => {
    // Arrange: one store; two engines on it stand for two processes.
    const store = memoryStore();
    // Act
    const seen = await runPastDefaultLease(store, store, 'long-step');
    // Assert
    expect(seen.leaseUntilAsked).toBeGreaterThanOrEqual(seen.requestedEnd);
    // The end the holder counts on, not the asked-for record's end (see the integration test).
    expect(seen.leaseUntilAfterBeat).toBeGreaterThanOrEqual(seen.requestedEnd);
    expect(seen.otherOutcome?.status).toBe('in_progress');
    expect(seen.holderOutcome).toMatchObject({ status: 'executed', value: 'first execution' });
  });

  it('is not cut back by a heartbeat that was in flight when the handler asked', async () => {
    // Arrange: a store that holds a heartbeat's extension (by the engine's 300 ms) until the test lets it
    // run, as a store with several connections may run it after a later call.
    const store = memoryStore();
    const extend = store.extend.bind(store);
    const heldBeats: Array<() => void> = [];
    store.extend = async (key, token, leaseMs) => {
      if (leaseMs === 300) await new Promise<void>((resolve) => heldBeats.push(resolve));
      return extend(key, token, leaseMs);
    };
    const idempotency = createIdempotency({ store, leaseMs: '300ms' });
    let requestedEnd = 0;
    let leaseUntilAsked = 0;
    // Act
    const outcome = await idempotency.run({ key: 'beat-in-flight' }, async (ctx) => {
      while (heldBeats.length === 0) await new Promise((resolve) => setTimeout(resolve, 5));
      requestedEnd = Date.now() + 2000;
      const asked = ctx.extendLease('2s');
      // The handler's call is on its way; the beat sent before it reaches the store only now.
      await new Promise((resolve) => setImmediate(resolve));
      heldBeats.shift()?.();
      await asked;
      const record = await store.get(ctx.storageKey);
      leaseUntilAsked = record?.status === 'in_progress' ? record.leaseUntil : 0;
      return 'done';
    });
    // Assert
    expect(leaseUntilAsked).toBeGreaterThanOrEqual(requestedEnd);
    expect(outcome).toMatchObject({ status: 'executed', value: 'done' });
  });
});
