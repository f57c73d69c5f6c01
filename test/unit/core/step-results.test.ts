/**
 * A step's result is what its codec keeps: the attempt that ran the step gets the same value a takeover
 * gets back from the record, so the code after the step behaves alike on every attempt. And a step of an
 * execution that already knows it lost its lease, or given a codec that is not one, does not run.
 */
import { describe, expect, it, vi } from 'vitest';
import {
  isInvalidOptionsError,
  isLeaseLostError,
  isOutcomeEncodingError,
  isReplayedError,
  type OutcomeCodec,
  type RunContext,
} from '../../../src/index.js';
import { MANUAL_LEASE_MS, manualEngine } from '../../helpers/crashed-step.js';
import { failingOpenEngine } from '../../helpers/failing-open.js';

/** Let a started run reach the store and its first awaits. */
async function settle() {
  for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
}

describe('ctx.step results', () => {
  it('returns the recorded form of a result the codec does not keep as is, on the first attempt too', async () => {
    // Arrange: a result with a Date, an undefined field and a Set (JSON keeps a string, nothing, {}).
    const { clock, idempotency } = manualEngine({});
    const charge = vi.fn(() => ({
      id: 'ch_1',
      at: new Date(0),
      note: undefined,
      tags: new Set(['a']),
    }));
    const seen: unknown[] = [];
    const handler = async (ctx: RunContext) => {
      seen.push(await ctx.step('charge', charge));
      if (ctx.attempt === 1) return new Promise<never>(() => {}); // the process "dies" here
      return 'done';
    };
    // Act: the first attempt runs the step and hangs; its lease ends; the retry takes it over.
    void idempotency.run({ key: 'k' }, handler);
    await settle();
    clock.advance(MANUAL_LEASE_MS + 1);
    const outcome = await idempotency.run({ key: 'k' }, handler);
    // Assert: one charge, and both attempts saw the same value, the one the record holds.
    expect(outcome).toMatchObject({ status: 'executed', value: 'done', attempt: 2 });
    expect(charge).toHaveBeenCalledTimes(1);
    const recorded = { id: 'ch_1', at: '1970-01-01T00:00:00.000Z', tags: {} };
    expect(seen).toStrictEqual([recorded, recorded]);
  });

  it('decodes the result with the step’s own codec', async () => {
    // Arrange
    const { idempotency } = manualEngine({});
    const codec = {
      encode: (value: unknown) => new TextEncoder().encode(String(value)),
      decode: (bytes: Uint8Array) => `decoded:${new TextDecoder().decode(bytes)}`,
    };
    // Act
    const outcome = await idempotency.run({ key: 'codec' }, (ctx) =>
      ctx.step('label', () => 42, { codec }),
    );
    // Assert
    expect(outcome).toMatchObject({ status: 'executed', value: 'decoded:42' });
  });

  it('does not run a step once the execution knows its lease is lost: the takeover makes the call', async () => {
    // Arrange: a paused attempt whose lease runs out and is taken over.
    const { clock, idempotency } = manualEngine({});
    const charge = vi.fn((attempt: number) => `ch_${attempt}`);
    let resume!: () => void;
    const paused = new Promise<void>((resolve) => {
      resume = resolve;
    });
    let abortedBeforeStep: boolean | undefined;
    const zombie = idempotency.run({ key: 'lost' }, async (ctx) => {
      await paused;
      // It learns of the loss (as a heartbeat would tell it), and goes on to its next step regardless.
      await ctx.extendLease().catch(() => {});
      abortedBeforeStep = ctx.signal.aborted;
      return ctx.step('charge', () => charge(ctx.attempt));
    });
    await settle();
    clock.advance(MANUAL_LEASE_MS + 1);
    const takeover = await idempotency.run({ key: 'lost' }, (ctx) =>
      ctx.step('charge', () => charge(ctx.attempt)),
    );
    // Act
    resume();
    const error = await zombie.catch((e: unknown) => e);
    // Assert: one charge, the takeover's.
    expect(takeover).toMatchObject({ status: 'executed', value: 'ch_2', attempt: 2 });
    expect(abortedBeforeStep).toBe(true);
    expect(isLeaseLostError(error)).toBe(true);
    expect(charge).toHaveBeenCalledTimes(1);
    expect(charge).toHaveBeenCalledWith(2);
  });

  it('refuses a codec that is not one before the step runs, so the key is not failed for good', async () => {
    // Arrange: a configuration mistake (encode is a string).
    const { idempotency } = manualEngine({});
    const charge = vi.fn(() => 'ch_1');
    const badCodec = { encode: 'json', decode: JSON.parse } as unknown as OutcomeCodec;
    // Act
    const first = await idempotency
      .run({ key: 'bad-codec' }, (ctx) => ctx.step('charge', charge, { codec: badCodec }))
      .catch((e: unknown) => e);
    const fixed = await idempotency.run({ key: 'bad-codec' }, (ctx) => ctx.step('charge', charge));
    // Assert: nothing charged by the bad call, and the key still free for the fixed one.
    expect(isInvalidOptionsError(first)).toBe(true);
    expect(fixed).toMatchObject({ status: 'executed', value: 'ch_1' });
    expect(charge).toHaveBeenCalledTimes(1);
  });

  it('records a result its codec cannot read back as OutcomeEncodingError, so no retry charges again', async () => {
    // Arrange: a codec whose decode rejects what its encode wrote (a schema check, a bug).
    const { idempotency } = manualEngine({});
    const charge = vi.fn(() => ({ id: 'ch_1' }));
    const codec: OutcomeCodec = {
      encode: (value) => new TextEncoder().encode(JSON.stringify(value)),
      decode: () => {
        throw new Error('schema: unknown field id');
      },
    };
    const handler = (ctx: RunContext) => ctx.step('charge', charge, { codec });
    // Act: the first run, then two retries.
    const runs = [];
    for (let i = 0; i < 3; i++) {
      runs.push(await idempotency.run({ key: 'unreadable' }, handler).catch((e: unknown) => e));
    }
    // Assert: the failure is final after the one charge.
    expect(isOutcomeEncodingError(runs[0])).toBe(true);
    expect(runs.slice(1).every(isReplayedError)).toBe(true);
    expect(charge).toHaveBeenCalledTimes(1);
  });

  it('does not start a step once the lease has run out with no extension, though nothing aborted yet', async () => {
    // Arrange: no automatic extension; the handler is slow before its step.
    const { clock, idempotency } = manualEngine({});
    const charge = vi.fn(() => 'ch_1');
    let resume!: () => void;
    const slow = new Promise<void>((resolve) => {
      resume = resolve;
    });
    let abortedBeforeStep: boolean | undefined;
    const run = idempotency.run({ key: 'ran-out' }, async (ctx) => {
      await slow;
      abortedBeforeStep = ctx.signal.aborted;
      return ctx.step('charge', charge);
    });
    await settle();
    // Act: the lease runs out on the engine's clock; no one has taken the key over.
    clock.advance(MANUAL_LEASE_MS + 1);
    resume();
    const error = await run.catch((e: unknown) => e);
    // Assert
    expect(abortedBeforeStep).toBe(false);
    expect(isLeaseLostError(error)).toBe(true);
    expect(charge).not.toHaveBeenCalled();
  });

  it('gives OutcomeEncodingError for an unencodable result when the engine fails open, as with the store up', async () => {
    // Arrange: a store that is down, an engine that fails open.
    const idempotency = failingOpenEngine();
    // Act
    const error = await idempotency
      .run({ key: 'open' }, (ctx) => ctx.step('charge', () => ({ amount: 10n })))
      .catch((e: unknown) => e);
    // Assert
    expect(isOutcomeEncodingError(error)).toBe(true);
  });
});
