import { describe, expect, it, vi } from 'vitest';
import { createIdempotency, memoryStore, type Store } from '../../../src/index.js';
import { withBatching } from '../../../src/store/batching.js';

describe('batching of claims and completions', () => {
  it('sends concurrent runs to the store as one claimMany and one completeMany', async () => {
    // Arrange
    const store = memoryStore();
    const claimMany = vi.spyOn(store, 'claimMany');
    const completeMany = vi.spyOn(store, 'completeMany');
    const claim = vi.spyOn(store, 'claim');
    const idempotency = createIdempotency({ store, extendLease: false });
    // Act
    const outcomes = await Promise.all(
      Array.from({ length: 50 }, (_, i) => idempotency.run({ key: `k${i % 25}` }, () => i)),
    );
    // Assert: 25 keys, each executed once; the second copy of each key saw the first one's claim.
    expect(outcomes.filter((o) => o.status === 'executed')).toHaveLength(25);
    expect(outcomes.filter((o) => o.status === 'in_progress')).toHaveLength(25);
    expect(claimMany).toHaveBeenCalledTimes(1);
    expect(claimMany.mock.calls[0]?.[0]).toHaveLength(50);
    expect(completeMany).toHaveBeenCalledTimes(1);
    expect(claim).not.toHaveBeenCalled();
  });

  it('splits bursts into batches of at most maxBatch', async () => {
    const store = memoryStore();
    const claimMany = vi.spyOn(store, 'claimMany');
    const idempotency = createIdempotency({ store, batch: { maxBatch: 8 }, extendLease: false });
    await Promise.all(
      Array.from({ length: 20 }, (_, i) => idempotency.run({ key: `k${i}` }, () => i)),
    );
    expect(claimMany.mock.calls.map(([batch]) => batch.length)).toEqual([8, 8, 4]);
  });

  it('sends every call alone when batching is off', async () => {
    const store = memoryStore();
    const claimMany = vi.spyOn(store, 'claimMany');
    const idempotency = createIdempotency({ store, batch: false, extendLease: false });
    await Promise.all(
      Array.from({ length: 5 }, (_, i) => idempotency.run({ key: `k${i}` }, () => i)),
    );
    expect(claimMany).not.toHaveBeenCalled();
  });

  it('rejects every caller of a failed batch with the store error, and nothing runs', async () => {
    const store = memoryStore();
    vi.spyOn(store, 'claimMany').mockRejectedValue(new Error('connection reset'));
    const fn = vi.fn();
    const idempotency = createIdempotency({ store });
    const results = await Promise.allSettled(
      Array.from({ length: 3 }, (_, i) => idempotency.run({ key: `k${i}` }, fn)),
    );
    expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected', 'rejected']);
    expect(fn).not.toHaveBeenCalled();
  });

  it('rejects a batch whose result count does not match', async () => {
    const store = memoryStore();
    vi.spyOn(store, 'claimMany').mockResolvedValue([]);
    const batched = withBatching(store);
    await expect(batched.claim('k', { fingerprint: '', leaseMs: 1000 })).rejects.toThrow(
      /0 results for 1/,
    );
  });

  it('leaves a store without batch support untouched', () => {
    const { claimMany: _a, completeMany: _b, ...single } = memoryStore();
    const store: Store = { ...single, capabilities: { crossProcess: false, purge: true } };
    expect(withBatching(store)).toBe(store);
  });
});
