/**
 * A custom store that answers a claim or a completion with something that is not a result (an item of a
 * batch, or a single call): that caller gets a `StoreUnavailableError` and its handler never runs on a
 * claim state nobody can read; the other callers of the same batch are answered as usual.
 */
import { describe, expect, it, vi } from 'vitest';
import {
  type ClaimResult,
  createIdempotency,
  isStoreUnavailableError,
  memoryStore,
  type Store,
} from '../../../src/index.js';

/** Answers a store could give that are not a `ClaimResult`. */
const malformedClaims: Array<[string, unknown]> = [
  ['undefined', undefined],
  ['null', null],
  ['a string', 'acquired'],
  ['claimed without a token', { claimed: true, attempt: 1, leaseUntil: 1 }],
  ['not claimed, without a record', { claimed: false }],
  [
    'a completed record without its outcome',
    { claimed: false, record: { status: 'completed', fingerprint: '' } },
  ],
  [
    'a record of an unknown status',
    { claimed: false, record: { status: 'done', fingerprint: '' } },
  ],
];

/** A memory store whose batch claims answer `answer` for the item of storage key `bad`. */
function storeWithBadClaimItem(bad: () => string, answer: unknown): Store {
  const inner = memoryStore();
  return {
    ...inner,
    claimMany: async (requests) => {
      const results = await inner.claimMany(requests);
      return results.map((result, i) =>
        requests[i]?.key === bad() ? (answer as ClaimResult) : result,
      );
    },
  };
}

describe('a malformed claim answer', () => {
  it.each(malformedClaims)('fails only its own caller of a batch: %s', async (_, answer) => {
    // Arrange
    let badKey = '';
    const store = storeWithBadClaimItem(() => badKey, answer);
    const claimMany = vi.spyOn(store, 'claimMany');
    const idempotency = createIdempotency({ store, extendLease: false, failOpen: true });
    badKey = idempotency.storageKeyFor('bad');
    const ran: string[] = [];
    // Act: one tick, one batch.
    const runs = ['a', 'bad', 'b'].map((key) =>
      idempotency.run({ key }, () => {
        ran.push(key);
        return key;
      }),
    );
    const [a, bad, b] = await Promise.allSettled(runs);
    // Assert: the handler never ran on the unreadable claim, even with failOpen; the others executed.
    expect(claimMany).toHaveBeenCalledTimes(1);
    expect(claimMany.mock.calls[0]?.[0]).toHaveLength(3);
    expect(bad?.status).toBe('rejected');
    const error = bad?.status === 'rejected' ? bad.reason : undefined;
    expect(isStoreUnavailableError(error)).toBe(true);
    expect(String(error.message)).toContain('malformed');
    expect(ran.sort()).toEqual(['a', 'b']);
    expect(a).toMatchObject({ status: 'fulfilled', value: { status: 'executed', value: 'a' } });
    expect(b).toMatchObject({ status: 'fulfilled', value: { status: 'executed', value: 'b' } });
  });

  it.each(malformedClaims)('fails a claim sent alone and reports it: %s', async (_, answer) => {
    // Arrange
    const inner = memoryStore();
    const store: Store = { ...inner, claim: async () => answer as ClaimResult };
    const onStoreError = vi.fn();
    const idempotency = createIdempotency({ store, batch: false, hooks: { onStoreError } });
    const fn = vi.fn(() => 'ran');
    // Act
    const run = idempotency.run({ key: 'k' }, fn);
    // Assert
    await expect(run).rejects.toSatisfy(isStoreUnavailableError);
    expect(fn).not.toHaveBeenCalled();
    expect(onStoreError).toHaveBeenCalledWith(expect.objectContaining({ operation: 'claim' }));
  });
});

describe('a malformed completion answer', () => {
  it('is retried as a failed completion, and the handler’s result is kept', async () => {
    // Arrange: the first completion is applied, but answered with `undefined`.
    const inner = memoryStore();
    let answers = 0;
    const store: Store = {
      ...inner,
      complete: async (key, token, outcome, retentionMs) => {
        const done = await inner.complete(key, token, outcome, retentionMs);
        return (answers++ === 0 ? undefined : done) as boolean;
      },
    };
    const onStoreError = vi.fn();
    const idempotency = createIdempotency({ store, batch: false, hooks: { onStoreError } });
    // Act
    const outcome = await idempotency.run({ key: 'k' }, () => 'value');
    // Assert: executed, not a LeaseLostError; the resend found the completion applied.
    expect(outcome).toMatchObject({ status: 'executed', value: 'value' });
    expect(onStoreError).toHaveBeenCalledWith(expect.objectContaining({ operation: 'complete' }));
    expect(await inner.get(idempotency.storageKeyFor('k'))).toMatchObject({ status: 'completed' });
  });

  it('of one batch item is retried for that caller alone', async () => {
    // Arrange: completeMany answers a string for the second item (applied all the same).
    const inner = memoryStore();
    const store: Store = {
      ...inner,
      completeMany: async (requests) => {
        const results = await inner.completeMany(requests);
        return results.map((done, i) => (i === 1 ? ('yes' as unknown as boolean) : done));
      },
    };
    const completeMany = vi.spyOn(store, 'completeMany');
    const complete = vi.spyOn(store, 'complete');
    const idempotency = createIdempotency({ store, extendLease: false });
    // Act
    const outcomes = await Promise.all(
      ['a', 'b', 'c'].map((key) => idempotency.run({ key }, () => key)),
    );
    // Assert
    expect(outcomes.map((o) => o.status)).toEqual(['executed', 'executed', 'executed']);
    expect(completeMany.mock.calls[0]?.[0]).toHaveLength(3);
    expect(complete).toHaveBeenCalledTimes(1);
  });

  it('fails with StoreUnavailableError when the store never answers a boolean', async () => {
    // Arrange
    const inner = memoryStore();
    const store: Store = { ...inner, complete: async () => 1 as unknown as boolean };
    // Retried while the lease lasts: a short one ends it soon.
    const idempotency = createIdempotency({ store, batch: false, leaseMs: 200 });
    // Act, Assert: not reported as executed on a completion nobody can read.
    await expect(idempotency.run({ key: 'k' }, () => 'value')).rejects.toSatisfy(
      isStoreUnavailableError,
    );
  });
});

describe('a malformed extension answer', () => {
  it('is a failed extension, not an extended lease', async () => {
    // Arrange: a truthy non-boolean (`'OK'`) would count as extended.
    const inner = memoryStore();
    const store: Store = { ...inner, extend: async () => 'OK' as unknown as boolean };
    const onStoreError = vi.fn();
    const idempotency = createIdempotency({ store, batch: false, hooks: { onStoreError } });
    // Act
    const outcome = idempotency.run({ key: 'k' }, async (ctx) => {
      await ctx.extendLease();
      return 'extended';
    });
    // Assert
    await expect(outcome).rejects.toSatisfy(isStoreUnavailableError);
    expect(onStoreError).toHaveBeenCalledWith(expect.objectContaining({ operation: 'extend' }));
  });
});
