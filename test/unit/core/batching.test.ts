import { describe, expect, it, vi } from 'vitest';
import { createIdempotency, memoryStore, type Store } from '../../../src/index.js';
import { withBatching } from '../../../src/store/batching.js';

describe('batching of claims and completions', () => {
  it('sends the first call alone and the calls that arrive meanwhile as one batch', async () => {
    // Arrange
    const store = memoryStore();
    const claimMany = vi.spyOn(store, 'claimMany');
    const completeMany = vi.spyOn(store, 'completeMany');
    const claim = vi.spyOn(store, 'claim');
    const complete = vi.spyOn(store, 'complete');
    const idempotency = createIdempotency({ store, extendLease: false, batch: { maxInFlight: 1 } });
    // Act
    const outcomes = await Promise.all(
      Array.from({ length: 50 }, (_, i) => idempotency.run({ key: `k${i % 25}` }, () => i)),
    );
    // Assert: 25 keys, each executed once; the second copy of each key saw the first one's claim.
    expect(outcomes.filter((o) => o.status === 'executed')).toHaveLength(25);
    expect(outcomes.filter((o) => o.status === 'in_progress')).toHaveLength(25);
    expect(claim).toHaveBeenCalledTimes(1);
    expect(claimMany).toHaveBeenCalledTimes(1);
    expect(claimMany.mock.calls[0]?.[0]).toHaveLength(49);
    expect(complete.mock.calls.length + completeMany.mock.calls.length).toBeLessThanOrEqual(3);
  });

  it('sends calls alone, with no added wait, while the store is not busy', async () => {
    const store = memoryStore();
    const claimMany = vi.spyOn(store, 'claimMany');
    const claim = vi.spyOn(store, 'claim');
    const idempotency = createIdempotency({ store, extendLease: false });
    for (let i = 0; i < 5; i++) await idempotency.run({ key: `seq${i}` }, () => i);
    expect(claim).toHaveBeenCalledTimes(5);
    expect(claimMany).not.toHaveBeenCalled();
  });

  it('keeps store calls far below the number of runs under a burst', async () => {
    const store = memoryStore();
    const calls = [
      vi.spyOn(store, 'claim'),
      vi.spyOn(store, 'claimMany'),
      vi.spyOn(store, 'complete'),
      vi.spyOn(store, 'completeMany'),
    ];
    const idempotency = createIdempotency({ store, extendLease: false });
    await Promise.all(
      Array.from({ length: 200 }, (_, i) => idempotency.run({ key: `b${i}` }, () => i)),
    );
    const total = calls.reduce((sum, spy) => sum + spy.mock.calls.length, 0);
    expect(total).toBeLessThanOrEqual(20);
  });

  it('sends the first call of a tick alone and holds the rest of that tick for one batch', async () => {
    // maxInFlight (4) would let the first four go alone; calls made in the same tick are a burst already,
    // so only the first goes at once and the other nine share one batch.
    const store = memoryStore();
    const claim = vi.spyOn(store, 'claim');
    const claimMany = vi.spyOn(store, 'claimMany');
    const batched = withBatching(store, {});
    await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        batched.claim(`tick${i}`, { fingerprint: 'fp', leaseMs: 1000 }),
      ),
    );
    expect(claim).toHaveBeenCalledTimes(1);
    expect(claimMany.mock.calls.map(([batch]) => batch.length)).toEqual([9]);
  });

  it("takes the store's batchMaxInFlight as the default and lets the caller override it", async () => {
    // Claims take 30 ms; four runs start in four different ticks while the first is outstanding.
    async function claimsAlone(capabilityMaxInFlight: number | undefined, override?: number) {
      const inner = memoryStore();
      const slow = <T>(value: Promise<T>) =>
        new Promise<T>((resolve) => setTimeout(() => resolve(value), 30));
      const store: Store = {
        ...inner,
        capabilities: { ...inner.capabilities, batchMaxInFlight: capabilityMaxInFlight },
        claim: (key, options) => slow(inner.claim(key, options)),
        claimMany: (requests) => slow(inner.claimMany!(requests)),
      };
      const claim = vi.spyOn(store, 'claim');
      const idempotency = createIdempotency({
        store,
        extendLease: false,
        ...(override === undefined ? {} : { batch: { maxInFlight: override } }),
      });
      const runs: Promise<unknown>[] = [];
      for (let i = 0; i < 4; i++) {
        runs.push(idempotency.run({ key: `tick${i}` }, () => i));
        await new Promise((resolve) => setImmediate(resolve));
      }
      await Promise.all(runs);
      return claim.mock.calls.length;
    }
    expect(await claimsAlone(undefined)).toBe(4);
    expect(await claimsAlone(1)).toBe(1);
    expect(await claimsAlone(1, 4)).toBe(4);
  });

  it('splits bursts into batches of at most maxBatch', async () => {
    const store = memoryStore();
    const claimMany = vi.spyOn(store, 'claimMany');
    const idempotency = createIdempotency({
      store,
      batch: { maxBatch: 8, maxInFlight: 1 },
      extendLease: false,
    });
    await Promise.all(
      Array.from({ length: 21 }, (_, i) => idempotency.run({ key: `k${i}` }, () => i)),
    );
    // The first call goes alone; the 20 that arrived meanwhile go in batches of at most 8.
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
    vi.spyOn(store, 'claim').mockRejectedValue(new Error('connection reset'));
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
    const batched = withBatching(store, { maxInFlight: 1 });
    const first = batched.claim('a', { fingerprint: '', leaseMs: 1000 });
    const second = batched.claim('b', { fingerprint: '', leaseMs: 1000 });
    const third = batched.claim('c', { fingerprint: '', leaseMs: 1000 });
    await expect(first).resolves.toMatchObject({ claimed: true });
    await expect(second).rejects.toThrow(/0 results for 2/);
    await expect(third).rejects.toThrow(/0 results for 2/);
  });

  it('leaves a store without batch support untouched', () => {
    const { claimMany: _a, completeMany: _b, ...single } = memoryStore();
    const store: Store = { ...single, capabilities: { crossProcess: false, purge: true } };
    expect(withBatching(store)).toBe(store);
  });
});
