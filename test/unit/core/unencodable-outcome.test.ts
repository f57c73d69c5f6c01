import { describe, expect, it } from 'vitest';
import {
  createIdempotency,
  type IdempotencyHooks,
  isOutcomeEncodingError,
  isReplayedError,
  memoryStore,
  OutcomeEncodingError,
  type Store,
} from '../../../src/index.js';
import { ManualClock } from '../../helpers/clock.js';
import { MANUAL_LEASE_MS, manualEngine } from '../../helpers/crashed-step.js';

const circular: Record<string, unknown> = { id: 'ch_1' };
circular.self = circular;

// Results the default (JSON) codec cannot encode, returned after the side effect happened.
const unencodable: Array<[string, () => unknown]> = [
  ['a BigInt', () => ({ chargeId: 'ch_1', amount: 4200n })],
  ['a circular object', () => circular],
  ['a function', () => () => 1],
];

function setup(
  hooks: IdempotencyHooks = {},
  store: Store = memoryStore({ clock: new ManualClock() }),
  leaseMs = 30_000,
) {
  return createIdempotency({ store, extendLease: false, hooks, leaseMs });
}

describe('a result the codec cannot encode', () => {
  for (const [what, result] of unencodable) {
    it(`(${what}) rejects with OutcomeEncodingError, then replays it: the handler runs once`, async () => {
      const idempotency = setup();
      let runs = 0;
      const handler = async () => {
        runs++;
        return result();
      };
      const first = idempotency.run({ key: 'pay-1', payload: { amount: 4200 } }, handler);
      await expect(first).rejects.toBeInstanceOf(OutcomeEncodingError);
      await expect(first).rejects.toSatisfy(
        (e) =>
          isOutcomeEncodingError(e) &&
          e.code === 'outcome_not_encodable' &&
          e.cause instanceof TypeError &&
          e.message.includes(e.cause.message),
      );
      const retry = idempotency.run({ key: 'pay-1', payload: { amount: 4200 } }, handler);
      await expect(retry).rejects.toSatisfy(
        (e) =>
          isReplayedError(e) &&
          e.original.name === 'OutcomeEncodingError' &&
          e.original.code === 'outcome_not_encodable',
      );
      expect(runs).toBe(1);
      await expect(idempotency.inspect('pay-1')).resolves.toMatchObject({ state: 'completed' });
    });
  }

  it('reports onFailed with stored: true, and no store error', async () => {
    const events: string[] = [];
    const idempotency = setup({
      onFailed: (e) => events.push(`failed stored=${e.stored}`),
      onExecuted: () => events.push('executed'),
      onStoreError: (e) => events.push(`store error ${e.operation}`),
    });
    await expect(idempotency.run({ key: 'k' }, () => 10n)).rejects.toSatisfy(
      isOutcomeEncodingError,
    );
    expect(events).toEqual(['failed stored=true']);
  });

  it('still rejects with OutcomeEncodingError when the error outcome cannot be stored either', async () => {
    const inner = memoryStore({ clock: new ManualClock() });
    const { claimMany: _c, completeMany: _m, ...rest } = inner;
    const store: Store = {
      ...rest,
      capabilities: { ...inner.capabilities, batch: false },
      complete: async () => {
        throw new Error('connection refused');
      },
    };
    const events: string[] = [];
    const idempotency = setup(
      {
        onFailed: (e) => events.push(`failed stored=${e.stored}`),
        onStoreError: (e) => events.push(`store error ${e.operation}`),
      },
      store,
      // A completion is retried while the lease lasts: a short one keeps it to the three attempts.
      100,
    );
    await expect(idempotency.run({ key: 'k' }, () => 10n)).rejects.toSatisfy(
      isOutcomeEncodingError,
    );
    expect(events).toEqual([
      'store error complete',
      'store error complete',
      'store error complete',
      'failed stored=false',
    ]);
    // The claim is left to expire, as after any failed completion: a retry meanwhile is told to wait.
    await expect(idempotency.run({ key: 'k' }, () => 1)).resolves.toMatchObject({
      status: 'in_progress',
    });
  });
});

describe('a step result the codec cannot encode', () => {
  it('rejects the step with OutcomeEncodingError and makes it the key’s final outcome: the step runs once', async () => {
    const idempotency = setup();
    let charges = 0;
    const handler = async (ctx: Parameters<Parameters<typeof idempotency.run>[1]>[0]) => {
      await ctx.step('charge', () => {
        charges++;
        return { chargeId: 'ch_1', amount: 4200n };
      });
      return 'done';
    };
    // Released, as a thrown error is by default, the retry would have charged again.
    await expect(idempotency.run({ key: 'pay-2' }, handler)).rejects.toBeInstanceOf(
      OutcomeEncodingError,
    );
    await expect(idempotency.run({ key: 'pay-2' }, handler)).rejects.toSatisfy(
      (e) => isReplayedError(e) && e.original.code === 'outcome_not_encodable',
    );
    expect(charges).toBe(1);
  });

  it('is recorded: an attempt that takes over a crashed one gets the failure back instead of running the step', async () => {
    const { clock, idempotency } = manualEngine({});
    let charges = 0;
    const charge = () => {
      charges++;
      return { chargeId: 'ch_1', amount: 4200n };
    };
    let recorded!: () => void;
    const stepDone = new Promise<void>((resolve) => {
      recorded = resolve;
    });
    // The first attempt swallows the step's rejection and then hangs, as a killed process would.
    void idempotency.run({ key: 'pay-3' }, async (ctx) => {
      await ctx.step('charge', charge).catch(() => recorded());
      return new Promise(() => {});
    });
    await stepDone;
    clock.advance(MANUAL_LEASE_MS + 1);
    const takeover = idempotency.run({ key: 'pay-3' }, async (ctx) => {
      await ctx.step('charge', charge);
      return 'done';
    });
    await expect(takeover).rejects.toSatisfy(
      (e) => isReplayedError(e) && e.original.code === 'outcome_not_encodable',
    );
    expect(charges).toBe(1);
  });
});

describe('a codec that throws something String() cannot describe', () => {
  it('still stores OutcomeEncodingError, so the handler runs once', async () => {
    // Arrange: a custom codec throws a null-prototype object (String() of it throws).
    const thrown = Object.assign(Object.create(null), { reason: 'unsupported type' });
    const codec = {
      encode: () => {
        throw thrown;
      },
      decode: () => undefined,
    };
    const idempotency = createIdempotency({
      store: memoryStore({ clock: new ManualClock() }),
      extendLease: false,
      codec,
    });
    let runs = 0;
    const handler = async () => {
      runs++;
      return 'charged';
    };
    // Act
    const first = idempotency.run({ key: 'pay-1' }, handler);
    const retry = first.catch(() => idempotency.run({ key: 'pay-1' }, handler));
    // Assert
    await expect(first).rejects.toSatisfy(
      (e) => isOutcomeEncodingError(e) && e.message.includes('{"reason":"unsupported type"}'),
    );
    await expect(retry).rejects.toSatisfy(isReplayedError);
    expect(runs).toBe(1);
  });
});
