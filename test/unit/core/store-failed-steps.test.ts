import { describe, expect, it, vi } from 'vitest';
import {
  createIdempotency,
  isStoreUnavailableError,
  memoryStore,
  type Store,
} from '../../../src/index.js';
import { ManualClock } from '../../helpers/clock.js';
import { hangAfterCharge } from '../../helpers/crashed-step.js';

// A step's store call that fails (`loadSteps` at a takeover's first step, `saveStep` after a step ran)
// throws StoreUnavailableError out of the handler. The engine released the claim on it, as on any thrown
// error, and a release deletes the steps recorded on the claim with its reservation: the next retry ran
// the charge again although it had been recorded. The claim is now left to its lease instead, and the
// retry after the lease takes it over and replays the charge.

const LEASE_MS = 1000;

/** A memory store whose `operation` fails once, when `armed` (after the call when `applied`). */
function failingOnce(operation: 'loadSteps' | 'saveStep', options: { applied?: boolean } = {}) {
  const clock = new ManualClock();
  const inner = memoryStore({ clock });
  const state = { armed: false, failures: 0 };
  const fail = () => {
    state.armed = false;
    state.failures++;
    throw new Error(`${operation}: connection reset`);
  };
  const store: Store = {
    ...inner,
    loadSteps: async (key, token) => {
      if (operation === 'loadSteps' && state.armed) fail();
      return inner.loadSteps(key, token);
    },
    saveStep: async (key, token, name, result) => {
      if (operation !== 'saveStep' || !state.armed) return inner.saveStep(key, token, name, result);
      // A write the store applied whose answer was lost (a timeout after the write), or one it never got.
      if (options.applied) await inner.saveStep(key, token, name, result);
      return fail();
    },
  };
  const onFailed = vi.fn();
  const onStoreError = vi.fn();
  const onStepReplayed = vi.fn();
  const idempotency = createIdempotency({
    store,
    clock,
    leaseMs: LEASE_MS,
    extendLease: false,
    cache: false,
    hooks: { onFailed, onStoreError, onStepReplayed },
  });
  let charges = 0;
  const charge = () => {
    charges++;
    return `ch_${charges}`;
  };
  return {
    clock,
    idempotency,
    state,
    charge,
    charges: () => charges,
    hooks: { onFailed, onStoreError, onStepReplayed },
  };
}

const request = { key: 'order-1', payload: { amount: 100 } };

describe('a step whose store call fails', () => {
  it("leaves a takeover whose loadSteps failed to its lease: the crashed attempt's charge is replayed, not run again", async () => {
    // Arrange: attempt 1 records its charge, then its process "dies"; its lease ends.
    const engine = failingOnce('loadSteps');
    await hangAfterCharge(engine.idempotency, request, engine.charge);
    engine.clock.advance(LEASE_MS + 1);
    engine.state.armed = true;

    // Act: the takeover's first step cannot load the recorded steps.
    const failed = await engine.idempotency
      .run(request, async (ctx) => ctx.step('charge', engine.charge))
      .catch((error: unknown) => error);
    const meanwhile = await engine.idempotency.run(request, async (ctx) =>
      ctx.step('charge', engine.charge),
    );
    engine.clock.advance(LEASE_MS + 1);
    const next = await engine.idempotency.run(request, async (ctx) =>
      ctx.step('charge', engine.charge),
    );

    // Assert
    expect(engine.state.failures).toBe(1);
    expect(isStoreUnavailableError(failed)).toBe(true);
    expect(engine.hooks.onStoreError).toHaveBeenCalledWith(
      expect.objectContaining({ operation: 'loadSteps' }),
    );
    expect(engine.hooks.onFailed).toHaveBeenCalledWith(
      expect.objectContaining({ attempt: 2, stored: false }),
    );
    // Before the lease ends a retry waits (HTTP 409 with Retry-After); after it, it takes the key over.
    expect(meanwhile).toMatchObject({ status: 'in_progress' });
    expect(next).toMatchObject({ status: 'executed', value: 'ch_1', attempt: 3 });
    expect(engine.charges()).toBe(1);
    expect(engine.hooks.onStepReplayed).toHaveBeenCalledWith(
      expect.objectContaining({ step: 'charge', attempt: 3 }),
    );
  });

  it('leaves the claim to its lease when saveStep failed after the store applied it: the charge is replayed', async () => {
    // Arrange
    const engine = failingOnce('saveStep', { applied: true });
    engine.state.armed = true;

    // Act: the charge runs, its recording is applied but its answer lost; the handler fails with it.
    const failed = await engine.idempotency
      .run(request, async (ctx) => ctx.step('charge', engine.charge))
      .catch((error: unknown) => error);
    engine.clock.advance(LEASE_MS + 1);
    const next = await engine.idempotency.run(request, async (ctx) =>
      ctx.step('charge', engine.charge),
    );

    // Assert
    expect(isStoreUnavailableError(failed)).toBe(true);
    expect(engine.hooks.onFailed).toHaveBeenCalledWith(
      expect.objectContaining({ attempt: 1, stored: false }),
    );
    expect(next).toMatchObject({ status: 'executed', value: 'ch_1', attempt: 2 });
    expect(engine.charges()).toBe(1);
  });

  it("keeps a takeover's replayed charge when a later step's saveStep fails", async () => {
    // Arrange: attempt 1 records its charge and dies; the takeover replays it, then cannot record `ship`.
    const engine = failingOnce('saveStep');
    await hangAfterCharge(engine.idempotency, request, engine.charge);
    engine.clock.advance(LEASE_MS + 1);
    let ships = 0;
    const handler = async (ctx: Parameters<Parameters<typeof engine.idempotency.run>[1]>[0]) => {
      const charged = await ctx.step('charge', engine.charge);
      engine.state.armed = ctx.attempt === 2;
      await ctx.step('ship', () => ++ships);
      return charged;
    };

    // Act
    const failed = await engine.idempotency.run(request, handler).catch((error: unknown) => error);
    engine.clock.advance(LEASE_MS + 1);
    const next = await engine.idempotency.run(request, handler);

    // Assert: `ship` was never recorded, so it runs again (its downstream key is for that).
    expect(isStoreUnavailableError(failed)).toBe(true);
    expect(next).toMatchObject({ status: 'executed', value: 'ch_1', attempt: 3 });
    expect(engine.charges()).toBe(1);
    expect(ships).toBe(2);
  });

  it('neither stores nor releases whatever the handler throws instead, storeErrors or not', async () => {
    // Arrange: a handler that turns the step's failure into an error of its own, under `storeErrors`.
    const engine = failingOnce('loadSteps');
    await hangAfterCharge(engine.idempotency, request, engine.charge);
    engine.clock.advance(LEASE_MS + 1);
    engine.state.armed = true;
    const own = new Error('payment service unavailable');

    // Act
    const failed = await engine.idempotency
      .run({ ...request, storeErrors: true }, async (ctx) => {
        try {
          return await ctx.step('charge', engine.charge);
        } catch {
          throw own;
        }
      })
      .catch((error: unknown) => error);
    engine.clock.advance(LEASE_MS + 1);
    const next = await engine.idempotency.run({ ...request, storeErrors: true }, async (ctx) =>
      ctx.step('charge', engine.charge),
    );

    // Assert: not stored as the key's outcome (a ReplayedError for good), not released.
    expect(failed).toBe(own);
    expect(engine.hooks.onFailed).toHaveBeenCalledWith(expect.objectContaining({ stored: false }));
    expect(next).toMatchObject({ status: 'executed', value: 'ch_1', attempt: 3 });
    expect(engine.charges()).toBe(1);
  });

  it('completes when the handler catches the failure and returns', async () => {
    // Arrange
    const engine = failingOnce('saveStep');
    engine.state.armed = true;

    // Act
    const outcome = await engine.idempotency.run(request, async (ctx) => {
      await ctx.step('charge', engine.charge).catch(() => undefined);
      return 'answered anyway';
    });
    const replay = await engine.idempotency.run(request, () => 'never runs');

    // Assert
    expect(outcome).toMatchObject({ status: 'executed', value: 'answered anyway' });
    expect(replay).toMatchObject({ status: 'replayed', value: 'answered anyway' });
  });
});
