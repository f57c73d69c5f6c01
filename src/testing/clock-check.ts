/**
 * The conformance check of rule 2 of the store contract ("the store's clock"): a store whose backend has
 * a clock judges every lease and retention by it, never by the clock of the process that calls it. Two
 * application servers' clocks drift apart; a store that compares `lease_until` with `Date.now()` lets the
 * one running ahead take over a live lease (two executions), and the one running behind keep a lease that
 * has ended. Both stay hidden while the tests and the backend share one machine's clock, so the check
 * moves the process's clock (`Date.now()` and `new Date()`) for the store's calls, and for nothing else
 * (see {@link withProcessClockMoved}).
 * @module
 */
import assert from 'node:assert/strict';
import { AsyncLocalStorage } from 'node:async_hooks';
import type { Store } from '../store/store.js';
import { DAY, sleep } from './check-kit.js';

/** Whose clock a store judges time by (the suite's `storeClock` option). */
export type StoreClock = 'backend' | 'process';

/** What the check needs besides the store under test. */
export interface StoreClockCheckContext {
  /** The store's name, for messages. */
  name: string;
  /** Whose clock the store says it uses; `undefined` when the suite was not told. */
  storeClock: StoreClock | undefined;
  /** A unique key of the check. */
  key(label?: string): string;
  /** The suite's short lease, in ms. */
  lease: number;
}

/** How far the check moves the process's clock: far beyond any lease it uses. */
export const CLOCK_SHIFT_MS = 10 * 60_000;
// How far a store clock may stand from the clock it is compared with (machines drift, calls take time).
const TOLERANCE_MS = CLOCK_SHIFT_MS / 4;

/** The offset of the store call being run, while it runs; cleared once it settles (see below). */
interface MovedClock {
  offsetMs: number;
}

const movedClocks = new AsyncLocalStorage<MovedClock>();
const RealDate = globalThis.Date;
const realNow = RealDate.now;
// How many calls run with a moved clock at this moment: the global `Date` is the moving one while any does.
let running = 0;

/** The time the code running now sees: the real time, moved only inside a call of the check. */
function movedNow(): number {
  return realNow.call(RealDate) + (movedClocks.getStore()?.offsetMs ?? 0);
}

// A subclass, so that `new Date()` moves too (a store passing `new Date()` to SQL is as common as one
// passing `Date.now()`), while `instanceof Date` still holds for dates made before the move.
class MovedDate extends RealDate {
  constructor(...args: unknown[]) {
    if (args.length === 0) super(movedNow());
    else super(...(args as [string | number | Date]));
  }
  static override now(): number {
    return movedNow();
  }
  static override [Symbol.hasInstance](value: unknown): boolean {
    return value instanceof RealDate;
  }
}

/**
 * Run `call` with the process's clock moved by `offsetMs`, for `call` alone: `Date.now()` and `new Date()`
 * (without arguments) read that much ahead (or behind) in the code `call` runs, and in what it awaits and
 * schedules (its async context), until it settles. Code outside that context keeps the real time, even
 * while `call` runs: the store's client library reacting to its own sockets and timers (reconnect
 * backoff, keep-alives, timeouts measured with `Date`), other clients, the test runner. Only the store's
 * own path through the call sees the moved clock, as it would on a machine whose clock is off. Timers are
 * untouched (they do not read the wall clock).
 *
 * The global `Date` is replaced while a call runs (a store reads the global), but it answers with the
 * real time outside the calls; anything the call creates that outlives it (a connection opened lazily by
 * its first command) reads the real time again once the call has settled.
 */
export async function withProcessClockMoved<T>(
  offsetMs: number,
  call: () => Promise<T>,
): Promise<T> {
  const moved: MovedClock = { offsetMs };
  if (running++ === 0) globalThis.Date = MovedDate as DateConstructor;
  try {
    return await movedClocks.run(moved, call);
  } finally {
    moved.offsetMs = 0;
    if (--running === 0) globalThis.Date = RealDate;
  }
}

/**
 * Check that `store` judges time by the clock it declares. `'backend'`: with the process's clock
 * {@link CLOCK_SHIFT_MS} ahead, a claim's lease still ends by the backend's clock, and a live lease is
 * neither taken over nor refused to its holder; with it as far behind, an ended lease is lost to its holder
 * and taken over, and an ended retention frees the key. `'process'`: a claim's lease ends by the process's
 * clock (SQLite and the memory store, whose backend has no clock of its own). Undeclared: fails a store
 * shared across processes (it must say which). Whatever the clock, a claim after a release made with the
 * process's clock behind still gets a larger token (rule 3: tokens come from a counter).
 */
export async function checkStoreClock(
  store: Store,
  context: StoreClockCheckContext,
): Promise<void> {
  const { name, storeClock, key, lease } = context;
  const ahead = <T>(call: () => Promise<T>) => withProcessClockMoved(CLOCK_SHIFT_MS, call);
  const behind = <T>(call: () => Promise<T>) => withProcessClockMoved(-CLOCK_SHIFT_MS, call);
  const minutes = `${CLOCK_SHIFT_MS / 60_000} minutes`;

  // Rule 3 holds whatever the clock: no record survives a release, so only a counter keeps the next
  // token above the released one when the clock steps back (NTP, another server's clock).
  const t = key('clock-token');
  const released = await store.claim(t, { fingerprint: 'fp', leaseMs: 60_000 });
  assert.ok(released.claimed, 'a claim of an absent key wins');
  assert.equal(await store.release(t, released.token), true, 'the holder releases');
  const next = await behind(() => store.claim(t, { fingerprint: 'fp', leaseMs: 60_000 }));
  assert.ok(next.claimed, 'a released key is claimed again');
  assert.ok(
    next.token > released.token,
    `after a release, a claim made with the process's clock ${minutes} behind got token ${next.token}, ` +
      `not above the released claim's ${released.token}: derive tokens from a counter or sequence that ` +
      'only grows (rule 3), never from the clock alone',
  );

  if (storeClock === undefined) {
    assert.ok(
      !store.capabilities.crossProcess,
      `store '${name}' can be shared by several processes (capabilities.crossProcess), whose clocks differ: ` +
        "say whose clock it judges leases by: `storeClock: 'backend'` (a database server's: the suite then " +
        "moves the process's clock and checks that nothing follows it), or `storeClock: 'process'` (only for " +
        'a backend with no clock that lives on one machine, like a SQLite file)',
    );
    return;
  }

  const k = key('clock-ahead');
  const claim = await ahead(() => store.claim(k, { fingerprint: 'fp-a', leaseMs: 60_000 }));
  assert.ok(claim.claimed, 'a claim of an absent key wins');
  const storeNow = claim.leaseUntil - 60_000;
  const drift = Math.round((storeNow - Date.now()) / 60_000);
  if (storeClock === 'process') {
    assert.ok(
      Math.abs(storeNow - (Date.now() + CLOCK_SHIFT_MS)) < TOLERANCE_MS,
      `store '${name}' says it judges time by the process's clock (storeClock: 'process'), but a claim ` +
        `made with that clock ${minutes} ahead got a lease ending by another clock (${drift} min from the ` +
        "real time): declare `storeClock: 'backend'`",
    );
    return;
  }
  assert.ok(
    Math.abs(drift * 60_000) < TOLERANCE_MS,
    `store '${name}' judged a claim by the process's clock: with that clock ${minutes} ahead, the claim's ` +
      `lease ends ${drift} min from the real time. Rule 2 (storeClock: 'backend'): compute and compare ` +
      "every lease and retention with the backend's clock (NOW() in SQL, TIME in Redis), never with " +
      'Date.now() or new Date() passed from the application',
  );
  const other = await ahead(() => store.claim(k, { fingerprint: 'fp-b', leaseMs: 60_000 }));
  assert.equal(
    other.claimed,
    false,
    `a live lease was taken over while the process's clock ran ${minutes} ahead: the store compares ` +
      "leases with the process's clock, not the backend's",
  );
  assert.equal(
    await ahead(() => store.extend(k, claim.token, 60_000)),
    true,
    `the holder of a live lease could not extend it while the process's clock ran ${minutes} ahead`,
  );
  assert.equal(
    await ahead(() => store.complete(k, claim.token, Buffer.from('ok'), 60_000)),
    true,
    `the holder of a live lease could not complete while the process's clock ran ${minutes} ahead`,
  );
  assert.equal(
    (await ahead(() => store.get(k)))?.status,
    'completed',
    `a completed record kept for 60 s was gone while the process's clock ran ${minutes} ahead`,
  );

  const ended = key('clock-behind');
  const done = key('clock-behind-done');
  const held = await store.claim(ended, { fingerprint: 'fp-a', leaseMs: lease });
  const completed = await store.claim(done, { fingerprint: 'fp-a', leaseMs: 60_000 });
  assert.ok(held.claimed && completed.claimed, 'a claim of a free key wins (held, completed)');
  assert.equal(await store.complete(done, completed.token, Buffer.from('ok'), lease), true);
  await sleep(lease + 150);
  assert.equal(
    await behind(() => store.complete(ended, held.token, Buffer.from('late'), DAY)),
    false,
    `a holder whose lease had ended completed while the process's clock ran ${minutes} behind`,
  );
  const takeover = await behind(() => store.claim(ended, { fingerprint: 'fp-b', leaseMs: 60_000 }));
  assert.ok(
    takeover.claimed,
    `an ended lease was not taken over while the process's clock ran ${minutes} behind`,
  );
  assert.equal(
    await behind(() => store.get(done)),
    undefined,
    `a record whose retention had ended was still returned while the process's clock ran ${minutes} behind`,
  );
}
