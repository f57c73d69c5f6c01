/**
 * How a batch call reports that it applied some items and not others: it rejects as a whole (a direct
 * caller of `claimMany` sees one failure, as the contract's result type has no room for an item's error),
 * with a {@link PartialBatchError} as the error or its `cause`, which holds every item's own result or
 * error. The batcher (`batching.ts`) reads it to give each of its callers its own item's answer.
 *
 * Why: the callers of one batch share nothing but the tick they called in. Rejecting them all for one
 * item's failure (a record another program overwrote with a value of the wrong type) tells the callers
 * whose claims were applied that the store was unavailable: their keys then stay held until the lease
 * runs out, and every retry meanwhile is answered "in progress".
 * @module
 */

/** Results of a batch call, some of them an item's error instead of its result. */
export class PartialBatchError<R = unknown> extends Error {
  /**
   * @param results - What the call would have resolved to, with an `Error` in place of each item that
   *   could not be applied: an array for `claimMany` / `completeMany`, `{ completed, claimed }` for
   *   `completeAndClaimMany`.
   * @param failed - How many items failed.
   */
  constructor(
    readonly results: R,
    failed: number,
  ) {
    super(`${failed} item(s) of the batch could not be applied`);
    this.name = 'PartialBatchError';
  }
}

/** The per-item results of a rejected batch call, if it reported them (as the error or its cause). */
export function partialResults(error: unknown): unknown {
  if (error instanceof PartialBatchError) return error.results;
  const cause: unknown = error instanceof Error ? error.cause : undefined;
  return cause instanceof PartialBatchError ? cause.results : undefined;
}
