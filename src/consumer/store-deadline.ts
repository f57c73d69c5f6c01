/**
 * The bound on the consumer's own store calls (`storeTimeout`). A store call that never answers (a store
 * of the application's own without timeouts, a connection hung without a command timeout) used to hold
 * its delivery's handler slot until `close()`: with as many such deliveries as slots, the consumer stopped
 * consuming, without a word. Past the bound the consumer stops waiting: the delivery is handed back to the
 * broker as a store-unavailable redelivery (never acked), and its slot is free.
 *
 * Giving up waiting is safe because the call itself is not undone, and whatever it does later is met by
 * the redelivery in the store: a late claim is released instead of run (process.ts), a late completion
 * makes the redelivery a duplicate, a late record of a dead letter makes it write the letter again.
 * @module
 */

import type { Idempotency } from '../core/engine.js';
import { StoreUnavailableError } from '../core/errors.js';
import type { Store } from '../store/store.js';

/** What {@link withinStoreTimeout} resolves to when the call did not answer in time. */
export const TIMED_OUT: unique symbol = Symbol('store call timed out');

/**
 * `call`'s answer, or {@link TIMED_OUT} once `ms` passed without one (the timer is cleared either way). A
 * rejection is passed on. The timer is unref'd: a call nobody answers must not keep a process alive.
 */
export async function withinStoreTimeout<T>(
  call: Promise<T>,
  ms: number,
): Promise<T | typeof TIMED_OUT> {
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<typeof TIMED_OUT>((resolve) => {
    timer = setTimeout(resolve, ms, TIMED_OUT);
    timer.unref();
  });
  try {
    return await Promise.race([call, timedOut]);
  } finally {
    clearTimeout(timer);
  }
}

/** The name of `engine`'s store, read with care: an engine of the user's own making may lack `store`. */
export function storeNameOf(engine: Idempotency): string {
  return (engine.store as Partial<Store> | undefined)?.name ?? 'unknown';
}

/**
 * The error a store call given up on is reported with: a `StoreUnavailableError`, as for a store that
 * failed, so hooks and metrics count it as the outage it is.
 * @param what - The call, as the message names it (`the claim`, `the release`).
 */
export function storeTimeoutError(
  engine: Idempotency,
  what: string,
  ms: number,
  then: string,
): StoreUnavailableError {
  return new StoreUnavailableError(
    `Store '${storeNameOf(engine)}' has not answered ${what} of this delivery within ${ms} ms: ${then}`,
  );
}

/** Something with a deadline on `performance.now()`, told once it has passed (see {@link DeadlineWatch}). */
export interface Watched {
  /** When it is due (`performance.now()`), set by {@link DeadlineWatch.watch}. */
  deadlineAt: number;
  /** Its deadline passed (told once, and no longer watched). */
  deadlinePassed(): void;
}

/** A deadline watch's timer callback: a function of the module, so that the timer keeps no closure. */
function checkDeadlines(watch: DeadlineWatch): void {
  watch.check();
}

/**
 * One timer for the store deadlines of every delivery in flight, instead of one per deadline: each
 * delivery has two (the claim's, then the completion's), and a timer armed and cleared for each cost
 * ~2–3 µs per message on this 2-core machine, a few per cent of the consumer's throughput. A deadline is
 * told at most one period late, which a bound meant for calls that never answer can afford.
 */
export class DeadlineWatch {
  private readonly watched = new Set<Watched>();
  private timer: NodeJS.Timeout | undefined;

  /** @param periodMs - How often the deadlines are checked (at least 1 ms). */
  constructor(private readonly periodMs: number) {}

  /** Tell `item` once `ms` have passed, unless it is unwatched before. Watching it again moves it. */
  watch(item: Watched, ms: number): void {
    item.deadlineAt = performance.now() + ms;
    this.watched.add(item);
    if (this.timer === undefined) {
      this.timer = setInterval(checkDeadlines, this.periodMs, this);
      // A store call nobody answers must not keep the process alive by itself.
      this.timer.unref();
    }
  }

  /** Stop watching `item` (its call answered). */
  unwatch(item: Watched): void {
    this.watched.delete(item);
  }

  /** Tell every item whose deadline has passed; the timer stops once nothing is watched. */
  check(): void {
    const now = performance.now();
    for (const item of this.watched) {
      if (item.deadlineAt > now) continue;
      this.watched.delete(item);
      item.deadlinePassed();
    }
    // Stopped here rather than in `unwatch`: under load the set is never empty for long, and a timer
    // cleared and armed again for each message is what this class saves.
    if (this.watched.size === 0) {
      clearInterval(this.timer);
      this.timer = undefined;
    }
  }
}

const watches = new Map<number, DeadlineWatch>();

/**
 * The deadline watch for a consumer whose `storeTimeout` is `storeTimeoutMs`: checked every eighth of it
 * (between 1 ms and 1 s), shared by the consumers of one period.
 */
export function deadlineWatchFor(storeTimeoutMs: number): DeadlineWatch {
  const periodMs = Math.min(1000, Math.max(1, Math.floor(storeTimeoutMs / 8)));
  let watch = watches.get(periodMs);
  if (watch === undefined) {
    watch = new DeadlineWatch(periodMs);
    watches.set(periodMs, watch);
  }
  return watch;
}
