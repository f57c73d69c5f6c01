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
import { type TIMED_OUT, within } from './timer-race.js';

export { TIMED_OUT } from './timer-race.js';

/**
 * `call`'s answer, or {@link TIMED_OUT} once `ms` passed without one (the timer is cleared either way). A
 * rejection is passed on. The timer is unref'd: a call nobody answers must not keep a process alive.
 */
export function withinStoreTimeout<T>(call: Promise<T>, ms: number): Promise<T | typeof TIMED_OUT> {
  return within(call, ms, true);
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
