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
) {
  return createIdempotency({ store, extendLease: false, hooks });
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
