/**
 * Rule 2 of the store contract ("the store's clock"): the suite must fail a store whose backend has a
 * clock but that judges leases by the process's (`Date.now()` passed to SQL), which no other check sees
 * while the tests and the backend share one machine's clock. A memory store whose clock does not read
 * `Date.now()` stands in for a database server's.
 */
import { describe, expect, it } from 'vitest';
import { type Clock, memoryStore, nextToken, type Store } from '../../../src/index.js';
import { type StoreClock, storeConformanceChecks } from '../../../src/testing/index.js';

const CHECK = 'follows the store’s clock, never the process’s';

// A clock the check cannot move: what a database server's NOW() is to the process.
const backendClock: Clock = { now: () => Math.floor(performance.timeOrigin + performance.now()) };

/** A memory store with `clock`, declared shared across processes (as any networked store is). */
function sharedStore(clock?: Clock): Store {
  const store = memoryStore(clock === undefined ? {} : { clock });
  return { ...store, capabilities: { ...store.capabilities, crossProcess: true } };
}

/**
 * The backend's clock writes the lease, the process's judges it: a store that reads the record, sees its
 * `lease_until` behind `Date.now()` and takes the key over.
 */
function mixedClockStore(): Store {
  const store = sharedStore(backendClock);
  return {
    ...store,
    async claim(key, options) {
      const seen = await store.get(key);
      if (seen?.status === 'in_progress' && seen.leaseUntil <= Date.now()) await store.delete(key);
      return store.claim(key, options);
    },
  };
}

/**
 * Tokens from the clock alone (`nextToken(previous, Date.now() * 1000)`): after a release no record is
 * left to count from, so a claim while the clock is behind gets a smaller token than the released one.
 */
function clockTokenStore(): Store {
  const store = memoryStore();
  // The memory store's own tokens, behind the clock-made ones this store hands out.
  const held = new Map<string, { token: number; inner: number }>();
  const inner = (key: string, token: number) =>
    held.get(key)?.token === token ? held.get(key)!.inner : -1;
  return {
    ...store,
    async claim(key, options) {
      const result = await store.claim(key, options);
      if (!result.claimed) return result;
      const token = nextToken(held.get(key)?.token, Date.now() * 1000);
      held.set(key, { token, inner: result.token });
      return { ...result, token };
    },
    complete: (key, token, outcome, retentionMs) =>
      store.complete(key, inner(key, token), outcome, retentionMs),
    async release(key, token) {
      const released = await store.release(key, inner(key, token));
      if (released) held.delete(key);
      return released;
    },
    extend: (key, token, leaseMs) => store.extend(key, inner(key, token), leaseMs),
  };
}

function clockCheck(createStore: () => Store, storeClock?: StoreClock) {
  const check = storeConformanceChecks({
    name: 'clocked',
    createStore,
    crossProcess: false,
    ...(storeClock === undefined ? {} : { storeClock }),
  }).find((c) => c.name.startsWith(CHECK));
  if (check === undefined) throw new Error(`no check named like '${CHECK}'`);
  return check;
}

describe('the store conformance suite, on the clock a store judges time by', () => {
  it('fails a store declared to use its backend’s clock that uses the process’s', async () => {
    const check = clockCheck(() => sharedStore(), 'backend');
    await expect(check.run()).rejects.toThrow(/judged a claim by the process's clock/);
  });

  it('fails a store that writes leases by the backend’s clock but compares them with the process’s', async () => {
    const check = clockCheck(mixedClockStore, 'backend');
    await expect(check.run()).rejects.toThrow(
      /a live lease was taken over while the process's clock/,
    );
  });

  it('fails a store whose tokens after a release come from the clock alone', async () => {
    const check = clockCheck(clockTokenStore);
    await expect(check.run()).rejects.toThrow(/not above the released claim's/);
  });

  it('fails a shared store that does not say whose clock it uses', async () => {
    const check = clockCheck(() => sharedStore(backendClock));
    await expect(check.run()).rejects.toThrow(/storeClock: 'backend'.*storeClock: 'process'/);
  });

  it('fails a store declared to use the process’s clock that uses another', async () => {
    const check = clockCheck(() => sharedStore(backendClock), 'process');
    await expect(check.run()).rejects.toThrow(/declare `storeClock: 'backend'`/);
  });

  it('refuses a storeClock that is neither backend nor process, naming it', () => {
    expect(() =>
      storeConformanceChecks({
        name: 'typo',
        createStore: () => memoryStore(),
        storeClock: 'database' as StoreClock,
      }),
    ).toThrow(/storeClock must be 'backend' or 'process', got "database"/);
  });

  it('gives the process its own clock back, even when the store fails', async () => {
    const RealDate = Date;
    await expect(clockCheck(mixedClockStore, 'backend').run()).rejects.toThrow();
    expect(Date).toBe(RealDate);
    expect(Math.abs(Date.now() - backendClock.now())).toBeLessThan(1_000);
  });

  it('moves the clock for the store’s calls only: code outside them keeps the real time meanwhile', async () => {
    // A store whose every call waits on I/O (a backend round trip), while a timer of its client library,
    // started before the check, reads the clock: a keep-alive, a reconnect backoff, a timeout by `Date`.
    const store = sharedStore(backendClock);
    const slow = Object.fromEntries(
      Object.entries(store).map(([name, value]) => [
        name,
        typeof value === 'function'
          ? async (...args: unknown[]) => {
              await new Promise((resolve) => setTimeout(resolve, 20));
              return (value as (...a: unknown[]) => unknown)(...args);
            }
          : value,
      ]),
    ) as unknown as Store;
    let worst = 0;
    let reads = 0;
    const library = setInterval(() => {
      reads++;
      worst = Math.max(worst, Math.abs(Date.now() - backendClock.now()));
    }, 2);
    try {
      await clockCheck(() => slow, 'backend').run();
    } finally {
      clearInterval(library);
    }
    expect(reads).toBeGreaterThan(10);
    expect(worst).toBeLessThan(1_000);
  });

  it('still moves the clock for what a call awaits and schedules', async () => {
    // A store that reads the clock only after its round trip (in a timer it sets), still judged.
    const store = sharedStore();
    const late: Store = {
      ...store,
      claim: (key, options) =>
        new Promise((resolve, reject) => {
          setTimeout(() => store.claim(key, options).then(resolve, reject), 5);
        }),
    };
    await expect(clockCheck(() => late, 'backend').run()).rejects.toThrow(
      /judged a claim by the process's clock/,
    );
  });

  it('passes stores that use the clock they declare, and an unshared store that declares none', async () => {
    await clockCheck(() => sharedStore(backendClock), 'backend').run();
    await clockCheck(() => sharedStore(), 'process').run();
    await clockCheck(() => memoryStore()).run();
  });
});
