/**
 * A claim its caller stopped waiting for. A consumer waits for a claim at most `storeTimeout`, then hands
 * the delivery back to the broker; a claim that answers *claimed* after that must not run the handler
 * (the redelivery may be running it elsewhere), so the consumer's function throws this at once, and the
 * engine releases the claim; a takeover (attempt > 1) it leaves to its lease instead, as its release would
 * delete the steps the crashed attempt recorded, which the next attempt must replay, not run again.
 *
 * Why a type of its own: thrown like any error of `fn`, it was reported to `onFailed`, as if a handler had
 * run and failed, and metrics alerting on handler failures counted a handler that never ran. The engine
 * reports it as what it is, a claim that did not answer in time: `onStoreError` with operation `claim`, as
 * a claim the store itself timed out is reported. Internal: not exported from the package.
 * @module
 */
import { StoreUnavailableError } from './errors.js';

/** Thrown out of `run`'s function, before any work, for a claim answered after its caller gave up. */
export class AbandonedClaimError extends StoreUnavailableError {
  /** Brand, checked by {@link isAbandonedClaimError}. */
  readonly isAbandonedClaimError = true;
}

/** Whether `error` is an {@link AbandonedClaimError}. */
export function isAbandonedClaimError(error: unknown): error is AbandonedClaimError {
  return (
    typeof error === 'object' &&
    error !== null &&
    (error as Partial<AbandonedClaimError>).isAbandonedClaimError === true
  );
}
