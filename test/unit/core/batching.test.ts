import { describe, expect, it, vi } from 'vitest';
import {
  createIdempotency,
  isInvalidOptionsError,
  memoryStore,
  type Store,
} from '../../../src/index.js';
import { type BatchingOptions, withBatching } from '../../../src/store/batching.js';
import { PartialBatchError } from '../../../src/store/partial-batch.js';
import type { StoreCapabilities } from '../../../src/store/store.js';
import { busyEventLoop, idleEventLoop } from '../../helpers/event-loop.js';

/**
 * Four runs started in four ticks of the event loop, each while the first run's claim is outstanding, on a
 * memory store whose claims take 30 ms, with `capabilities` added to its own: how many claims went alone
 * (the others waited and went as one batch).
 */
async function loneClaims(
  capabilities: Partial<StoreCapabilities>,
  batch?: BatchingOptions,
): Promise<number> {
  const inner = memoryStore();
  const slow = <T>(value: Promise<T>) =>
    new Promise<T>((resolve) => setTimeout(() => resolve(value), 30));
  const store: Store = {
    ...inner,
    capabilities: { ...inner.capabilities, ...capabilities },
    claim: (key, options) => slow(inner.claim(key, options)),
    claimMany: (requests) => slow(inner.claimMany!(requests)),
  };
  const claim = vi.spyOn(store, 'claim');
  const idempotency = createIdempotency({ store, extendLease: false, batch });
  const runs: Promise<unknown>[] = [];
  for (let i = 0; i < 4; i++) {
    runs.push(idempotency.run({ key: `tick${i}` }, () => i));
    await new Promise((resolve) => setImmediate(resolve));
  }
  await Promise.all(runs);
  return claim.mock.calls.length;
}

describe('batching of claims and completions', () => {
  it('sends the calls of one tick as one batch', async () => {
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
    expect(claim).not.toHaveBeenCalled();
    expect(claimMany).toHaveBeenCalledTimes(1);
    expect(claimMany.mock.calls[0]?.[0]).toHaveLength(50);
    expect(complete.mock.calls.length + completeMany.mock.calls.length).toBeLessThanOrEqual(2);
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

  it('holds every call of a tick until the tick ends, and sends them as one batch', async () => {
    // maxInFlight (4) would let the first four go alone; calls made in the same tick are a burst already,
    // so all ten share one batch, and nothing is sent before the tick ends.
    const store = memoryStore();
    const claim = vi.spyOn(store, 'claim');
    const claimMany = vi.spyOn(store, 'claimMany');
    const batched = withBatching(store, {});
    const claims = Array.from({ length: 10 }, (_, i) =>
      batched.claim(`tick${i}`, { fingerprint: 'fp', leaseMs: 1000 }),
    );
    expect(claimMany).not.toHaveBeenCalled();
    await Promise.all(claims);
    expect(claim).not.toHaveBeenCalled();
    expect(claimMany.mock.calls.map(([batch]) => batch.length)).toEqual([10]);
  });

  it("gathers a whole turn's calls with window 'turn', where 'tick' sends each tick's at its end", async () => {
    // Two claims in two ticks of one turn of the event loop (as two HTTP requests read in one poll phase).
    async function batchSizes(window: 'tick' | 'turn') {
      const store = memoryStore();
      const claim = vi.spyOn(store, 'claim');
      const claimMany = vi.spyOn(store, 'claimMany');
      const batched = withBatching(store, { window });
      const first = batched.claim('turn-a', { fingerprint: 'fp', leaseMs: 1000 });
      const second = new Promise((resolve) => {
        process.nextTick(() =>
          resolve(batched.claim('turn-b', { fingerprint: 'fp', leaseMs: 1000 })),
        );
      });
      await Promise.all([first, second]);
      return [
        ...claim.mock.calls.map(() => 1),
        ...claimMany.mock.calls.map(([batch]) => batch.length),
      ];
    }
    expect(await batchSizes('tick')).toEqual([1, 1]);
    expect(await batchSizes('turn')).toEqual([2]);
  });

  it("takes the store's batchWindow as the default", async () => {
    // Two runs started in two ticks of one turn; the claims go together only in a 'turn' window.
    async function claimCalls(batchWindow: 'tick' | 'turn' | undefined) {
      // An idle gauge first: a loop measured busy (a loaded machine, other test files in this worker)
      // widens the window to the turn whatever the store says, and the two claims went as one.
      await idleEventLoop();
      const inner = memoryStore();
      const store: Store = { ...inner, capabilities: { ...inner.capabilities, batchWindow } };
      const claim = vi.spyOn(store, 'claim');
      const claimMany = vi.spyOn(store, 'claimMany');
      // A claim may also leave with the first run's completion, in one call.
      const both = vi.spyOn(store, 'completeAndClaimMany');
      const idempotency = createIdempotency({ store, extendLease: false });
      const first = idempotency.run({ key: 'w1' }, () => 1);
      await new Promise((resolve) => process.nextTick(resolve));
      const second = idempotency.run({ key: 'w2' }, () => 2);
      await Promise.all([first, second]);
      return claim.mock.calls.length + claimMany.mock.calls.length + both.mock.calls.length;
    }
    expect(await claimCalls(undefined)).toBe(2);
    expect(await claimCalls('tick')).toBe(2);
    expect(await claimCalls('turn')).toBe(1);
  });

  it("takes the store's batchMaxInFlight as the default and lets the caller override it", async () => {
    expect(await loneClaims({})).toBe(4);
    expect(await loneClaims({ batchMaxInFlight: 1 })).toBe(1);
    expect(await loneClaims({ batchMaxInFlight: 1 }, { maxInFlight: 4 })).toBe(4);
  });

  it('holds calls back to maxInFlightWhenBusy only while the event loop is busy', async () => {
    // Idle: the store's default for busy times changes nothing, every run's claim goes at once.
    await idleEventLoop();
    expect(await loneClaims({ batchMaxInFlightWhenBusy: 1 })).toBe(4);
    // Busy: one claim outstanding, the three that follow wait for it and go as one batch.
    busyEventLoop();
    expect(await loneClaims({ batchMaxInFlightWhenBusy: 1 })).toBe(1);
    busyEventLoop();
    expect(await loneClaims({ batchMaxInFlightWhenBusy: 1 }, { maxInFlightWhenBusy: 4 })).toBe(4);
    // Never above maxInFlight: a caller's 1 holds at all times.
    busyEventLoop();
    expect(await loneClaims({ batchMaxInFlightWhenBusy: 4 }, { maxInFlight: 1 })).toBe(1);
    // A store without a default for busy times keeps its maxInFlight under load.
    busyEventLoop();
    expect(await loneClaims({})).toBe(4);
  });

  it('splits bursts into batches of at most maxBatch', async () => {
    const store = memoryStore();
    // Claim batches, whether they leave alone or with completions (completeAndClaimMany).
    const sizes: number[] = [];
    const { claimMany, completeAndClaimMany } = store;
    store.claimMany = (requests) => {
      sizes.push(requests.length);
      return claimMany(requests);
    };
    store.completeAndClaimMany = (completes, claims) => {
      sizes.push(claims.length);
      return completeAndClaimMany(completes, claims);
    };
    const idempotency = createIdempotency({
      store,
      batch: { maxBatch: 8, maxInFlight: 1 },
      extendLease: false,
    });
    await Promise.all(
      Array.from({ length: 21 }, (_, i) => idempotency.run({ key: `k${i}` }, () => i)),
    );
    // The 21 claims of the tick go in batches of at most 8.
    expect(sizes).toEqual([8, 8, 5]);
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

  it('rejects the callers of a store call that throws instead of rejecting, and keeps batching', async () => {
    // Arrange: a store whose batch methods throw synchronously (a bug), once each.
    const store = memoryStore();
    const { claimMany, completeAndClaimMany } = store;
    store.claimMany = () => {
      store.claimMany = claimMany;
      throw new Error('claimMany threw');
    };
    store.completeAndClaimMany = () => {
      store.completeAndClaimMany = completeAndClaimMany;
      throw new Error('completeAndClaimMany threw');
    };
    const batched = withBatching(store, { maxInFlight: 1 });
    const claim = (key: string) => batched.claim(key, { fingerprint: '', leaseMs: 60_000 });
    // Act
    const thrown = await Promise.allSettled([claim('a'), claim('b')]);
    const held = await claim('c');
    if (!held.claimed) throw new Error('not claimed');
    const [completed, claimedAlongside] = await Promise.allSettled([
      batched.complete('c', held.token, new Uint8Array(), 60_000),
      claim('d'),
    ]);
    const after = await Promise.all([claim('e'), claim('f')]);
    // Assert: the callers of each throwing call are rejected with its error; later calls go through.
    expect(thrown.map((r) => r.status === 'rejected' && String(r.reason))).toEqual([
      'Error: claimMany threw',
      'Error: claimMany threw',
    ]);
    expect(completed.status === 'rejected' && String(completed.reason)).toBe(
      'Error: completeAndClaimMany threw',
    );
    expect(claimedAlongside.status).toBe('rejected');
    expect(after.every((result) => result.claimed)).toBe(true);
  });

  it('rejects a batch whose result count does not match', async () => {
    const store = memoryStore();
    vi.spyOn(store, 'claimMany').mockResolvedValue([]);
    const batched = withBatching(store, { maxInFlight: 1 });
    const first = batched.claim('a', { fingerprint: '', leaseMs: 1000 });
    const second = batched.claim('b', { fingerprint: '', leaseMs: 1000 });
    const third = batched.claim('c', { fingerprint: '', leaseMs: 1000 });
    await expect(first).rejects.toThrow(/0 results for 3/);
    await expect(second).rejects.toThrow(/0 results for 3/);
    await expect(third).rejects.toThrow(/0 results for 3/);
  });

  it('rejects, never strands, the callers of a batch whose answer is not an array', async () => {
    // Arrange: a custom store's claimMany resolves to nothing, its completeAndClaimMany to an object
    // without the lists. Thrown while settling, that left every caller waiting forever (and the flush's
    // promise rejected unhandled).
    const store = memoryStore();
    store.claimMany = async () => undefined as never;
    store.completeAndClaimMany = async () => ({}) as never;
    const batched = withBatching(store, { maxInFlight: 1 });
    const claim = (key: string) => batched.claim(key, { fingerprint: '', leaseMs: 60_000 });
    const unhandled = vi.fn();
    process.on('unhandledRejection', unhandled);
    const within = <T>(promise: Promise<T>) =>
      Promise.race([promise, new Promise((resolve) => setTimeout(resolve, 1000, 'still waiting'))]);
    try {
      // Act
      const claims = await within(Promise.allSettled([claim('a'), claim('b')]));
      const held = await store.claim('c', { fingerprint: '', leaseMs: 60_000 });
      if (!held.claimed) throw new Error('not claimed');
      const both = await within(
        Promise.allSettled([
          batched.complete('c', held.token, Uint8Array.of(1, 0, 0x75), 60_000),
          claim('d'),
        ]),
      );
      await new Promise((resolve) => setImmediate(resolve));
      // Assert
      for (const settled of [claims, both]) {
        expect(settled).not.toBe('still waiting');
        for (const result of settled as PromiseSettledResult<unknown>[]) {
          expect(result.status === 'rejected' && String(result.reason)).toMatch(
            /batch returned undefined for \d items/,
          );
        }
      }
      expect(unhandled).not.toHaveBeenCalled();
    } finally {
      process.off('unhandledRejection', unhandled);
    }
  });

  it('gives each caller its own item of a batch that failed in part, not the batch error', async () => {
    // Arrange: a store whose batches fail for the key 'bad' alone, after applying the others, and say so.
    const store = memoryStore();
    const { claimMany, completeAndClaimMany } = store;
    const itemError = new Error('WRONGTYPE');
    store.claimMany = async (requests) => {
      const results: unknown[] = await claimMany(requests.filter((r) => r.key !== 'bad'));
      const all = requests.map((r) => (r.key === 'bad' ? itemError : results.shift()));
      throw new Error('store unavailable', { cause: new PartialBatchError(all) });
    };
    store.completeAndClaimMany = async (completes, claims) => {
      const { completed, claimed } = await completeAndClaimMany(
        completes,
        claims.filter((r) => r.key !== 'bad'),
      );
      const all = claims.map((r) => (r.key === 'bad' ? itemError : claimed.shift()));
      throw new PartialBatchError({ completed, claimed: all });
    };
    const batched = withBatching(store, { maxInFlight: 1 });
    const claim = (key: string) => batched.claim(key, { fingerprint: '', leaseMs: 60_000 });
    // Act
    const [good, bad, other] = await Promise.allSettled([claim('x'), claim('bad'), claim('y')]);
    const held = await store.claim('c', { fingerprint: '', leaseMs: 60_000 });
    if (!held.claimed) throw new Error('not claimed');
    const [completed, badAlongside, claimedAlongside] = await Promise.allSettled([
      batched.complete('c', held.token, Uint8Array.of(1, 0, 0x75), 60_000),
      claim('bad'),
      claim('z'),
    ]);
    // Assert: the failed item's caller gets its own error; every other caller its own result.
    expect(good.status === 'fulfilled' && good.value.claimed).toBe(true);
    expect(other.status === 'fulfilled' && other.value.claimed).toBe(true);
    expect(bad.status === 'rejected' && bad.reason).toBe(itemError);
    expect(completed.status === 'fulfilled' && completed.value).toBe(true);
    expect(badAlongside.status === 'rejected' && badAlongside.reason).toBe(itemError);
    expect(claimedAlongside.status === 'fulfilled' && claimedAlongside.value.claimed).toBe(true);
  });

  it.each([
    [{ maxBatch: 0 }, /batch\.maxBatch must be a positive integer, got 0/],
    [{ maxBatch: 1.5 }, /batch\.maxBatch/],
    [{ maxInFlight: 0 }, /batch\.maxInFlight must be a positive integer, got 0/],
    [{ maxInFlight: -1 }, /batch\.maxInFlight/],
    [{ maxInFlightWhenBusy: 0 }, /batch\.maxInFlightWhenBusy must be a positive integer, got 0/],
    [{ window: 'frame' }, /batch\.window must be 'tick' or 'turn', got frame/],
  ])('refuses batch options %j with InvalidOptionsError', (batch, message) => {
    const create = () =>
      createIdempotency({ store: memoryStore(), batch: batch as BatchingOptions });
    expect(create).toThrow(message);
    try {
      create();
    } catch (error) {
      expect(isInvalidOptionsError(error)).toBe(true);
    }
  });

  it('leaves a store without batch support untouched', () => {
    const { claimMany: _a, completeMany: _b, ...single } = memoryStore();
    const store: Store = { ...single, capabilities: { crossProcess: false, purge: true } };
    expect(withBatching(store)).toBe(store);
  });
});
