import { describe, expect, it, vi } from 'vitest';
import {
  createIdempotency,
  type Idempotency,
  isReplayedError,
  memoryStore,
  OutcomeEncodingError,
  type RunContext,
} from '../../../src/index.js';
import { ManualClock } from '../../helpers/clock.js';

// A step whose result the codec cannot encode is recorded as that failure (the charge was made), and the
// step rejects with OutcomeEncodingError, which the engine stores as the key's final outcome. An attempt
// that crashed in between (step recorded, final not stored) was taken over, the takeover's step replayed
// the recorded failure as a ReplayedError, and the engine took that for an ordinary failure: it released
// the claim, deleting the recorded step, so the next retry charged again. The failure is now as final on
// the takeover as it would have been on the first attempt, and stored as the first attempt's would have
// been.

const LEASE_MS = 1000;

function engine(options: { storeErrors?: boolean } = {}) {
  const clock = new ManualClock();
  const onFailed = vi.fn();
  const idempotency = createIdempotency({
    store: memoryStore({ clock }),
    clock,
    leaseMs: LEASE_MS,
    extendLease: false,
    cache: false,
    hooks: { onFailed },
    ...options,
  });
  let charges = 0;
  // A charge whose answer the default (JSON) codec cannot encode: a BigInt amount.
  const charge = () => {
    charges++;
    return { id: `ch_${charges}`, amount: 4200n };
  };
  return { clock, idempotency, charge, charges: () => charges, onFailed };
}

/**
 * Run `key` until its `charge` step has been recorded (as the failure it is), then hang for good, as a
 * process killed before the engine stored the final outcome would.
 */
async function crashAfterUnencodableCharge(
  idempotency: Idempotency,
  key: string,
  charge: () => unknown,
): Promise<void> {
  let recorded!: () => void;
  const stepDone = new Promise<void>((resolve) => {
    recorded = resolve;
  });
  void idempotency.run({ key }, async (ctx) => {
    await ctx.step('charge', charge).catch(() => recorded());
    return new Promise(() => {});
  });
  await stepDone;
}

const isOriginalFailure = (error: unknown) =>
  isReplayedError(error) &&
  error.original.name === 'OutcomeEncodingError' &&
  error.original.code === 'outcome_not_encodable';

describe("a takeover's replayed step failure", () => {
  it('is stored as final, as the original OutcomeEncodingError would have been: the charge is never made again', async () => {
    // Arrange: attempt 1 records the charge's failure, then dies; its lease ends.
    const { clock, idempotency, charge, charges, onFailed } = engine();
    await crashAfterUnencodableCharge(idempotency, 'pay-1', charge);
    clock.advance(LEASE_MS + 1);
    const handler = async (ctx: RunContext) => {
      await ctx.step('charge', charge);
      return 'done';
    };

    // Act: the takeover's step replays the failure and the handler rethrows it; then a retry, after
    // what would have been the takeover's lease too.
    const takeover = await idempotency.run({ key: 'pay-1' }, handler).catch((e: unknown) => e);
    clock.advance(LEASE_MS + 1);
    const retry = await idempotency.run({ key: 'pay-1' }, handler).catch((e: unknown) => e);

    // Assert
    expect(isOriginalFailure(takeover)).toBe(true);
    expect(isOriginalFailure(retry)).toBe(true);
    expect(charges()).toBe(1);
    expect(onFailed).toHaveBeenCalledWith(expect.objectContaining({ attempt: 2, stored: true }));
    await expect(idempotency.inspect('pay-1')).resolves.toMatchObject({ state: 'completed' });
  });

  it('is stored as final when the handler throws an error of its own instead', async () => {
    // Arrange
    const { clock, idempotency, charge, charges } = engine();
    await crashAfterUnencodableCharge(idempotency, 'pay-2', charge);
    clock.advance(LEASE_MS + 1);
    const own = new Error('payment failed');
    const handler = async (ctx: RunContext) => {
      try {
        return await ctx.step('charge', charge);
      } catch {
        throw own;
      }
    };

    // Act
    const takeover = await idempotency.run({ key: 'pay-2' }, handler).catch((e: unknown) => e);
    clock.advance(LEASE_MS + 1);
    const retry = await idempotency.run({ key: 'pay-2' }, handler).catch((e: unknown) => e);

    // Assert: this caller gets the handler's error; the key keeps the step's failure (not released).
    expect(takeover).toBe(own);
    expect(isOriginalFailure(retry)).toBe(true);
    expect(charges()).toBe(1);
  });

  it('still completes when the handler catches it and returns', async () => {
    // Arrange
    const { clock, idempotency, charge, charges } = engine();
    await crashAfterUnencodableCharge(idempotency, 'pay-3', charge);
    clock.advance(LEASE_MS + 1);
    const handler = async (ctx: RunContext) => {
      await ctx.step('charge', charge).catch(() => undefined);
      return 'answered anyway';
    };

    // Act
    const takeover = await idempotency.run({ key: 'pay-3' }, handler);
    const retry = await idempotency.run({ key: 'pay-3' }, handler);

    // Assert
    expect(takeover).toMatchObject({ status: 'executed', value: 'answered anyway', attempt: 2 });
    expect(retry).toMatchObject({ status: 'replayed', value: 'answered anyway' });
    expect(charges()).toBe(1);
  });

  it("stores the handler's own error when storeErrors says so", async () => {
    // Arrange
    const { clock, idempotency, charge, charges } = engine({ storeErrors: true });
    await crashAfterUnencodableCharge(idempotency, 'pay-4', charge);
    clock.advance(LEASE_MS + 1);
    const handler = async (ctx: RunContext) => {
      await ctx.step('charge', charge).catch(() => {
        throw new TypeError('payment failed');
      });
    };

    // Act
    await idempotency.run({ key: 'pay-4' }, handler).catch(() => undefined);
    const retry = await idempotency.run({ key: 'pay-4' }, handler).catch((e: unknown) => e);

    // Assert
    expect(retry).toSatisfy(
      (e) => isReplayedError(e) && e.original.name === 'TypeError' && e.original.code === undefined,
    );
    expect(charges()).toBe(1);
  });
});

describe('a step failure recorded on the first attempt', () => {
  it('is stored as final when the handler throws an error of its own instead of the OutcomeEncodingError', async () => {
    // Arrange: a handler that turns the step's failure into its own error (storeErrors off).
    const { idempotency, charge, charges, onFailed } = engine();
    const own = new Error('payment failed');
    const handler = async (ctx: RunContext) => {
      await ctx.step('charge', charge).catch((error: unknown) => {
        expect(error).toBeInstanceOf(OutcomeEncodingError);
        throw own;
      });
    };

    // Act
    const first = await idempotency.run({ key: 'pay-5' }, handler).catch((e: unknown) => e);
    const retry = await idempotency.run({ key: 'pay-5' }, handler).catch((e: unknown) => e);

    // Assert: released, the retry charged again.
    expect(first).toBe(own);
    expect(isOriginalFailure(retry)).toBe(true);
    expect(charges()).toBe(1);
    expect(onFailed).toHaveBeenCalledWith(expect.objectContaining({ attempt: 1, stored: true }));
  });
});
