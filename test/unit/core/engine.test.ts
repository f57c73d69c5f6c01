import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  createIdempotency,
  isInvalidKeyError,
  isLeaseLostError,
  isReplayedError,
  isStoreUnavailableError,
  memoryStore,
  type Store,
} from '../../../src/index.js';
import { ManualClock } from '../../helpers/clock.js';

function setup(options: Partial<Parameters<typeof createIdempotency>[0]> = {}) {
  const clock = new ManualClock();
  const store = memoryStore({ clock });
  const idempotency = createIdempotency({ store, clock, extendLease: false, ...options });
  return { clock, store, idempotency };
}

/** A promise the test settles by hand, to hold a handler in flight. */
function gate<T = void>() {
  let open!: (value: T) => void;
  const promise = new Promise<T>((resolve) => {
    open = resolve;
  });
  return { promise, open };
}

function failingStore(inner: Store, failing: Partial<Record<keyof Store, number>>): Store {
  const remaining = { ...failing };
  const wrap =
    (name: keyof Store) =>
    async (...args: unknown[]) => {
      if ((remaining[name] ?? 0) > 0) {
        remaining[name] = (remaining[name] ?? 0) - 1;
        throw new Error(`${String(name)} failed: connection refused`);
      }
      return (inner[name] as (...a: unknown[]) => unknown)(...args);
    };
  // Batching off (no claimMany/completeMany), so every call goes through the failing wrappers.
  const { claimMany: _claimMany, completeMany: _completeMany, ...rest } = inner;
  return {
    ...rest,
    capabilities: { ...inner.capabilities, batch: false },
    claim: wrap('claim') as Store['claim'],
    complete: wrap('complete') as Store['complete'],
    release: wrap('release') as Store['release'],
    extend: wrap('extend') as Store['extend'],
  };
}

/** Let a started run reach the store: claims are batched on the next turn of the event loop. */
async function claimLands() {
  for (let i = 0; i < 3; i++) await new Promise((resolve) => setImmediate(resolve));
}

afterEach(() => {
  vi.useRealTimers();
});

describe('createIdempotency().run', () => {
  it('executes once and replays the stored value to the same key', async () => {
    // Arrange
    const { idempotency } = setup();
    const fn = vi.fn(async () => ({ id: 'pay_1', amount: 100 }));
    // Act
    const first = await idempotency.run({ key: 'k1', payload: { amount: 100 } }, fn);
    const second = await idempotency.run({ key: 'k1', payload: { amount: 100 } }, fn);
    // Assert
    expect(first).toMatchObject({
      status: 'executed',
      value: { id: 'pay_1', amount: 100 },
      attempt: 1,
    });
    expect(second).toEqual({ status: 'replayed', value: { id: 'pay_1', amount: 100 } });
    expect(fn).toHaveBeenCalledTimes(1);
  });

  it('answers in_progress with the remaining lease while the first call runs', async () => {
    const { idempotency, clock } = setup({ leaseMs: '10s', cache: false });
    const hold = gate();
    const running = idempotency.run({ key: 'k' }, () => hold.promise);
    await claimLands();
    clock.advance(4000);
    const second = await idempotency.run({ key: 'k' }, () => 'never');
    expect(second).toEqual({ status: 'in_progress', retryAfterMs: 6000 });
    hold.open();
    await expect(running).resolves.toMatchObject({ status: 'executed' });
  });

  it('reports a mismatch for a different payload, in flight and after completion, on every retry', async () => {
    const { idempotency } = setup();
    const hold = gate();
    const running = idempotency.run({ key: 'k', payload: { amount: 100 } }, () => hold.promise);
    await claimLands();
    expect(await idempotency.run({ key: 'k', payload: { amount: 999 } }, () => 1)).toEqual({
      status: 'mismatch',
    });
    hold.open();
    await running;
    for (let i = 0; i < 3; i++) {
      expect(await idempotency.run({ key: 'k', payload: { amount: 999 } }, () => 1)).toEqual({
        status: 'mismatch',
      });
    }
  });

  it('never shares a record between scopes', async () => {
    const { idempotency } = setup();
    const a = await idempotency.run({ key: 'same', scope: 'tenant-a' }, () => 'a');
    const b = await idempotency.run({ key: 'same', scope: 'tenant-b' }, () => 'b');
    expect(a).toMatchObject({ status: 'executed', value: 'a' });
    expect(b).toMatchObject({ status: 'executed', value: 'b' });
  });

  it('releases the claim when fn throws, so a retry executes again', async () => {
    const { idempotency } = setup();
    const boom = new Error('provider down');
    await expect(idempotency.run({ key: 'k' }, () => Promise.reject(boom))).rejects.toBe(boom);
    const retry = await idempotency.run({ key: 'k' }, () => 'ok');
    expect(retry).toMatchObject({ status: 'executed', value: 'ok' });
  });

  it('stores a thrown error as final when storeErrors says so, and replays it as ReplayedError', async () => {
    const { idempotency } = setup({
      storeErrors: (e) => (e as { code?: string }).code === 'card_declined',
    });
    const declined = Object.assign(new Error('Card declined'), { code: 'card_declined' });
    await expect(idempotency.run({ key: 'k' }, () => Promise.reject(declined))).rejects.toBe(
      declined,
    );
    const replay = idempotency.run({ key: 'k' }, () => 'never');
    await expect(replay).rejects.toSatisfy(
      (e) =>
        isReplayedError(e) &&
        e.original.code === 'card_declined' &&
        e.original.message === 'Card declined',
    );
    // Errors the policy does not mark final still release.
    await expect(
      idempotency.run({ key: 'k2' }, () => Promise.reject(new Error('x'))),
    ).rejects.toThrow('x');
    await expect(idempotency.run({ key: 'k2' }, () => 'ok')).resolves.toMatchObject({
      status: 'executed',
    });
  });

  it('rejects invalid keys with InvalidKeyError before touching the store', async () => {
    const { store } = setup();
    const claim = vi.spyOn(store, 'claim');
    const claimMany = vi.spyOn(store, 'claimMany');
    const idempotency = createIdempotency({ store });
    for (const key of ['', 'x'.repeat(256), 'tab\there', 'café', 'line\n']) {
      await expect(idempotency.run({ key }, () => 1)).rejects.toSatisfy(isInvalidKeyError);
    }
    expect(claim).not.toHaveBeenCalled();
    expect(claimMany).not.toHaveBeenCalled();
  });

  it('fails closed when the store is unreachable: StoreUnavailableError and fn never runs', async () => {
    const { store } = setup();
    const idempotency = createIdempotency({ store: failingStore(store, { claim: 1 }) });
    const fn = vi.fn(() => 'ran');
    await expect(idempotency.run({ key: 'k' }, fn)).rejects.toSatisfy(isStoreUnavailableError);
    expect(fn).not.toHaveBeenCalled();
  });

  it('passes through a StoreUnavailableError from another copy of the package, keeping its retryAfterMs', async () => {
    // Arrange: an error with the brand and code, but not an instance of this copy's class.
    const foreign = Object.assign(new Error('redis down'), {
      isIdempotencyError: true,
      code: 'store_unavailable',
      retryAfterMs: 4321,
    });
    const { store } = setup();
    const down: Store = {
      ...failingStore(store, {}),
      claim: () => Promise.reject(foreign),
    };
    const idempotency = createIdempotency({ store: down });
    // Act / Assert
    await expect(idempotency.run({ key: 'k' }, () => 1)).rejects.toBe(foreign);
  });

  it('runs unprotected only when failOpen is set, and says so', async () => {
    const { store } = setup();
    const onFailOpen = vi.fn();
    const idempotency = createIdempotency({
      store: failingStore(store, { claim: 1 }),
      hooks: { onFailOpen },
    });
    const outcome = await idempotency.run({ key: 'k', failOpen: true }, () => 'ran');
    expect(outcome).toMatchObject({ status: 'executed', value: 'ran', failedOpen: true, token: 0 });
    expect(onFailOpen).toHaveBeenCalledOnce();
  });

  it('retries a completion that failed transiently instead of losing the outcome', async () => {
    const { store } = setup();
    const onStoreError = vi.fn();
    const idempotency = createIdempotency({
      store: failingStore(store, { complete: 2 }),
      hooks: { onStoreError },
      extendLease: false,
    });
    const outcome = await idempotency.run({ key: 'k' }, () => 'v');
    expect(outcome).toMatchObject({ status: 'executed', value: 'v' });
    expect(onStoreError).toHaveBeenCalledTimes(2);
    await expect(idempotency.run({ key: 'k' }, () => 'again')).resolves.toEqual({
      status: 'replayed',
      value: 'v',
    });
  });

  it('serves hot replays from the local cache without a store round trip', async () => {
    const { idempotency, store, clock } = setup();
    await idempotency.run({ key: 'k' }, () => 'v');
    const claim = vi.spyOn(store, 'claim');
    const onReplayed = vi.fn();
    const cached = createIdempotency({ store, clock, hooks: { onReplayed } });
    await cached.run({ key: 'k' }, () => 'x'); // fills this engine's cache from the store
    await cached.run({ key: 'k' }, () => 'x'); // served from the cache
    expect(claim).toHaveBeenCalledTimes(1);
    expect(onReplayed.mock.calls.map(([e]) => e.fromCache)).toEqual([false, true]);
  });

  it('keeps a crashed run’s key for its own request: another payload is a mismatch for the retention', async () => {
    const { idempotency, clock } = setup({ leaseMs: 1000, retentionMs: 60_000, cache: false });
    const onTakeover = vi.fn();
    const onMismatch = vi.fn();
    const observed = createIdempotency({
      store: idempotency.store,
      clock,
      extendLease: false,
      leaseMs: 1000,
      retentionMs: 60_000,
      cache: false,
      hooks: { onTakeover, onMismatch },
    });
    void observed.run({ key: 'k', payload: { amount: 1 } }, () => new Promise(() => {}));
    await claimLands();
    clock.advance(1001);
    const other = vi.fn(() => 'other');
    expect(await observed.run({ key: 'k', payload: { amount: 2 } }, other)).toEqual({
      status: 'mismatch',
    });
    expect(other).not.toHaveBeenCalled();
    expect(onMismatch).toHaveBeenCalledTimes(1);
    const same = await observed.run({ key: 'k', payload: { amount: 1 } }, (ctx) => ctx.attempt);
    expect(same).toMatchObject({ status: 'executed', value: 2, attempt: 2 });
    expect(onTakeover).toHaveBeenCalledTimes(1);

    // Once the retention has passed, the crashed request's key is a new key for anyone.
    void observed.run({ key: 'later', payload: { amount: 1 } }, () => new Promise(() => {}));
    await claimLands();
    clock.advance(60_001);
    const fresh = await observed.run({ key: 'later', payload: { amount: 2 } }, () => 'fresh');
    expect(fresh).toMatchObject({ status: 'executed', value: 'fresh' });
  });

  it('gives fn a stable downstream key per step, the same after a takeover', async () => {
    const { idempotency, clock } = setup({ leaseMs: 1000, cache: false });
    const seen: string[] = [];
    const crashed = idempotency.run({ key: 'k' }, (ctx) => {
      seen.push(ctx.downstreamKey('charge'), ctx.downstreamKey('email'));
      return new Promise(() => {}); // never finishes: the holder "crashed"
    });
    void crashed;
    await claimLands();
    clock.advance(1001);
    const takeover = await idempotency.run({ key: 'k' }, (ctx) => {
      seen.push(ctx.downstreamKey('charge'));
      return ctx.attempt;
    });
    expect(takeover).toMatchObject({ status: 'executed', value: 2, attempt: 2 });
    expect(seen[0]).toBe(seen[2]);
    expect(seen[0]).not.toBe(seen[1]);
    expect(seen[0]).toMatch(/^ik_[0-9a-f]{40}$/);
  });

  it('fences a holder whose lease was taken over: LeaseLostError and the newer outcome survives', async () => {
    const { idempotency, clock } = setup({ leaseMs: 1000, cache: false });
    const onLeaseLost = vi.fn();
    const slow = createIdempotency({
      store: idempotency.store,
      clock,
      extendLease: false,
      cache: false,
      leaseMs: 1000,
      hooks: { onLeaseLost },
    });
    const hold = gate<string>();
    const zombie = slow.run({ key: 'k' }, () => hold.promise);
    await claimLands();
    clock.advance(1500);
    await expect(idempotency.run({ key: 'k' }, () => 'fresh')).resolves.toMatchObject({
      status: 'executed',
    });
    hold.open('stale');
    await expect(zombie).rejects.toSatisfy(isLeaseLostError);
    expect(onLeaseLost).toHaveBeenCalledOnce();
    await expect(idempotency.run({ key: 'k' }, () => 'x')).resolves.toEqual({
      status: 'replayed',
      value: 'fresh',
    });
  });

  it('keeps a long handler’s lease alive with the heartbeat', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
    const store = memoryStore();
    const idempotency = createIdempotency({ store, leaseMs: 300, cache: false });
    const running = idempotency.run({ key: 'k' }, async () => {
      await new Promise((resolve) => setTimeout(resolve, 2000));
      return 'done';
    });
    await vi.advanceTimersByTimeAsync(1500);
    await expect(idempotency.run({ key: 'k' }, () => 'dup')).resolves.toMatchObject({
      status: 'in_progress',
    });
    await vi.advanceTimersByTimeAsync(600);
    await expect(running).resolves.toMatchObject({ status: 'executed', value: 'done' });
  });

  it('aborts ctx.signal with LeaseLostError when the heartbeat finds the lease gone', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
    const store = memoryStore();
    const onLeaseLost = vi.fn();
    const idempotency = createIdempotency({
      store,
      leaseMs: 300,
      cache: false,
      hooks: { onLeaseLost },
    });
    let signal: AbortSignal | undefined;
    const running = idempotency.run({ key: 'k' }, async (ctx) => {
      signal = ctx.signal;
      await new Promise((resolve) => setTimeout(resolve, 1000));
      return 'late';
    });
    await vi.advanceTimersByTimeAsync(10);
    await store.delete(idempotency.storageKeyFor('k')); // an operator removed the record
    await vi.advanceTimersByTimeAsync(200);
    expect(signal?.aborted).toBe(true);
    expect(isLeaseLostError(signal?.reason)).toBe(true);
    const settled = expect(running).rejects.toSatisfy(isLeaseLostError);
    await vi.advanceTimersByTimeAsync(1000);
    await settled;
    // One loss, reported once: by the heartbeat, not again by the fenced completion.
    expect(onLeaseLost).toHaveBeenCalledOnce();
  });

  it('stops extending a hung handler after maxExecution: its signal aborts and a retry takes the key over', async () => {
    // maxExecution is timed on the monotonic clock (performance.now), faked with the rest.
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date', 'performance'] });
    const store = memoryStore();
    const onLeaseLost = vi.fn();
    const idempotency = createIdempotency({
      store,
      leaseMs: 300,
      maxExecution: '1s',
      cache: false,
      hooks: { onLeaseLost },
    });
    let signal: AbortSignal | undefined;
    let extendLease: (() => Promise<void>) | undefined;
    const hung = idempotency.run({ key: 'k' }, (ctx) => {
      signal = ctx.signal;
      extendLease = () => ctx.extendLease();
      return new Promise<string>(() => {}); // never settles
    });
    void hung.catch(() => {});
    // Kept alive past several leases while under maxExecution…
    await vi.advanceTimersByTimeAsync(900);
    expect(signal?.aborted).toBe(false);
    await expect(idempotency.run({ key: 'k' }, () => 'retry')).resolves.toMatchObject({
      status: 'in_progress',
    });
    // …then aborted within half a lease after it, and no longer extended, by beat or by hand.
    await vi.advanceTimersByTimeAsync(250);
    expect(signal?.aborted).toBe(true);
    expect(isLeaseLostError(signal?.reason)).toBe(true);
    expect((signal?.reason as Error | undefined)?.message).toMatch(/maxExecution/);
    expect(onLeaseLost).toHaveBeenCalledOnce();
    await expect(extendLease?.()).rejects.toSatisfy(isLeaseLostError);
    // Within one lease more, the claim has run out and a retry runs the key.
    await vi.advanceTimersByTimeAsync(300);
    await expect(idempotency.run({ key: 'k' }, () => 'retry')).resolves.toMatchObject({
      status: 'executed',
      value: 'retry',
      attempt: 2,
    });
  });

  it('lets a handler that finishes within maxExecution complete as usual', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date', 'performance'] });
    const idempotency = createIdempotency({
      store: memoryStore(),
      leaseMs: 300,
      maxExecution: '2s',
      cache: false,
    });
    let signal: AbortSignal | undefined;
    const running = idempotency.run({ key: 'k' }, async (ctx) => {
      signal = ctx.signal;
      await new Promise((resolve) => setTimeout(resolve, 1500));
      return 'done';
    });
    await vi.advanceTimersByTimeAsync(1600);
    await expect(running).resolves.toMatchObject({ status: 'executed', value: 'done' });
    expect(signal?.aborted).toBe(false);
  });

  it('rejects an invalid maxExecution', () => {
    expect(() => createIdempotency({ store: memoryStore(), maxExecution: 'soon' as '1s' })).toThrow(
      /maxExecution/,
    );
  });

  it('lets fn extend its lease explicitly', async () => {
    const { idempotency, clock } = setup({ leaseMs: 1000, cache: false });
    const hold = gate();
    const running = idempotency.run({ key: 'k' }, async (ctx) => {
      await ctx.extendLease('5s');
      await hold.promise;
      return 'ok';
    });
    await new Promise((resolve) => setImmediate(resolve));
    clock.advance(3000);
    await expect(idempotency.run({ key: 'k' }, () => 'dup')).resolves.toMatchObject({
      status: 'in_progress',
    });
    hold.open();
    await expect(running).resolves.toMatchObject({ status: 'executed' });
  });

  it('reports a failed fn through onFailed: released by default, stored with storeErrors', async () => {
    const { store, clock } = setup();
    const onFailed = vi.fn();
    const onStoreError = vi.fn();
    const idempotency = createIdempotency({
      store,
      clock,
      extendLease: false,
      hooks: { onFailed, onStoreError },
    });
    const boom = new Error('card declined');
    let token = 0;
    await expect(
      idempotency.run({ key: 'released' }, (ctx) => {
        token = ctx.token;
        clock.advance(25);
        throw boom;
      }),
    ).rejects.toBe(boom);
    await expect(
      idempotency.run({ key: 'stored', storeErrors: true }, () => Promise.reject(boom)),
    ).rejects.toBe(boom);
    expect(onFailed.mock.calls.map(([e]) => [e.stored, e.attempt, e.durationMs])).toEqual([
      [false, 1, 25],
      [true, 1, 0],
    ]);
    expect(onFailed.mock.calls[0]?.[0]).toMatchObject({ namespace: 'default', token });
    expect(onStoreError).not.toHaveBeenCalled();
    // Released: a retry runs again. Stored: a retry replays the error.
    await expect(idempotency.run({ key: 'released' }, () => 'ok')).resolves.toMatchObject({
      status: 'executed',
    });
    await expect(idempotency.run({ key: 'stored' }, () => 'ok')).rejects.toSatisfy(isReplayedError);
  });

  it('reports a failed completion of a stored error once, as complete, not again as release', async () => {
    const { store } = setup();
    const onStoreError = vi.fn();
    const onFailed = vi.fn();
    const idempotency = createIdempotency({
      store: failingStore(store, { complete: 3 }),
      extendLease: false,
      // A completion is retried while the lease lasts: a short one keeps it to the three attempts.
      leaseMs: 100,
      hooks: { onStoreError, onFailed },
    });
    await expect(
      idempotency.run({ key: 'k', storeErrors: true }, () => {
        throw new Error('declined');
      }),
    ).rejects.toThrow('declined');
    expect(onStoreError.mock.calls.map(([e]) => e.operation)).toEqual([
      'complete',
      'complete',
      'complete',
    ]);
    expect(onFailed.mock.calls.map(([e]) => e.stored)).toEqual([false]);
  });

  it('ignores hooks that throw', async () => {
    const { store } = setup();
    const idempotency = createIdempotency({
      store,
      hooks: {
        onExecuted: () => {
          throw new Error('metrics broke');
        },
      },
    });
    await expect(idempotency.run({ key: 'k' }, () => 1)).resolves.toMatchObject({
      status: 'executed',
    });
  });

  it('round-trips bytes, undefined and JSON values through the default codec', async () => {
    const { idempotency } = setup({ cache: false });
    const bytes = Uint8Array.from([0, 255, 1, 128]);
    await idempotency.run({ key: 'b' }, () => bytes);
    await idempotency.run({ key: 'u' }, () => undefined);
    expect(await idempotency.run({ key: 'b' }, () => null)).toEqual({
      status: 'replayed',
      value: bytes,
    });
    expect(await idempotency.run({ key: 'u' }, () => null)).toEqual({
      status: 'replayed',
      value: undefined,
    });
  });

  it('refuses malformed durations with InvalidOptionsError', () => {
    const store = memoryStore();
    expect(() => createIdempotency({ store, leaseMs: '10 parsecs' as never })).toThrow(/leaseMs/);
    expect(() => createIdempotency({ store, retentionMs: -5 })).toThrow(/retentionMs/);
    expect(() => createIdempotency({ store, leaseMs: '1.5s' })).not.toThrow();
    // Past 100 years is a unit slip, which the store's backend would refuse mid-call.
    expect(() => createIdempotency({ store, retentionMs: '36600d' })).toThrow(
      /retentionMs: must be a positive duration of at most 100 years/,
    );
    expect(() => createIdempotency({ store, retentionMs: '36500d' })).not.toThrow();
  });
});
