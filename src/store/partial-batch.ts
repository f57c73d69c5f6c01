/**
 * How a batch call reports that it applied some items and not others: it rejects as a whole (a direct
 * caller of `claimMany` sees one failure, as the contract's result type has no room for an item's error),
 * with a {@link PartialBatchError} as the error or its `cause`, which holds every item's own result or
 * error. The batcher (`batching.ts`) reads it to give each of its callers its own item's answer. An item's
 * error is not always a failure: a Redis store waiting for replicas puts a `ReplicationShortError` in the
 * place of a write it applied but could not confirm, which the engine takes as applied; the error's message
 * and counts tell the two apart.
 *
 * Why: the callers of one batch share nothing but the tick they called in. Rejecting them all for one
 * item's failure (a record another program overwrote with a value of the wrong type) tells the callers
 * whose claims were applied that the store was unavailable: their keys then stay held until the lease
 * runs out, and every retry meanwhile is answered "in progress".
 * @module
 */
import { isReplicationShortError } from '../core/errors.js';

/** Results of a batch call, some of them an item's error instead of its result. */
export class PartialBatchError<R = unknown> extends Error {
  /** Items that could not be applied (or were refused): an error other than a `ReplicationShortError`. */
  readonly failed: number;
  /**
   * Items that **were** applied, but that fewer replicas than the store waits for confirmed (the Redis
   * store's `waitForReplicas`): a `ReplicationShortError` in the item's place, whose `result` is its answer.
   */
  readonly unconfirmed: number;

  /**
   * @param results - What the call would have resolved to, with an `Error` in place of each item that
   *   could not be applied, or was applied short of its replicas: an array for `claimMany` /
   *   `completeMany`, `{ completed, claimed }` for `completeAndClaimMany`. The items are counted from it.
   */
  constructor(readonly results: R) {
    const { failed, unconfirmed } = countItems(results);
    super(describe(failed, unconfirmed));
    this.name = 'PartialBatchError';
    this.failed = failed;
    this.unconfirmed = unconfirmed;
  }
}

// Counted from the items rather than given by each store: a count of "errors" that took an applied but
// unconfirmed completion for one that failed made the message say that applied items were not.
function countItems(results: unknown): { failed: number; unconfirmed: number } {
  const lists =
    typeof results === 'object' && results !== null && !Array.isArray(results)
      ? Object.values(results)
      : [results];
  let failed = 0;
  let unconfirmed = 0;
  for (const list of lists) {
    if (!Array.isArray(list)) continue;
    for (const item of list) {
      if (isReplicationShortError(item)) unconfirmed++;
      else if (item instanceof Error) failed++;
    }
  }
  return { failed, unconfirmed };
}

function describe(failed: number, unconfirmed: number): string {
  const applied = 'applied but not confirmed by enough replicas (waitForReplicas)';
  if (unconfirmed === 0) return `${failed} item(s) of the batch could not be applied`;
  if (failed === 0) return `${unconfirmed} item(s) of the batch were ${applied}; none failed`;
  return `${failed} item(s) of the batch could not be applied; ${unconfirmed} other(s) were ${applied}`;
}

/** The per-item results of a rejected batch call, if it reported them (as the error or its cause). */
export function partialResults(error: unknown): unknown {
  if (error instanceof PartialBatchError) return error.results;
  const cause: unknown = error instanceof Error ? error.cause : undefined;
  return cause instanceof PartialBatchError ? cause.results : undefined;
}
