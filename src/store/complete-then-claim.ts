/**
 * `completeAndClaimMany` sent as two batches, `completeMany` then `claimMany`, for a store that cannot
 * send both in one call (a Redis Cluster, a PostgreSQL schema without the combined function, a list that
 * repeats a key). Shared by the stores so that every such path answers alike: each item's failure is its
 * own caller's, and a completion that was applied is never reported as one that failed.
 * @module
 */
import { isReplicationShortError } from '../core/errors.js';
import type { ClaimResult } from '../core/record.js';
import { PartialBatchError, partialResults } from './partial-batch.js';
import type { CompleteAndClaimResults } from './store.js';

/** A batch's items, an `Error` in place of each one the batch did not answer with a result. */
interface Items<R> {
  results: Array<R | Error>;
  /** Items that were not applied: errors other than a `ReplicationShortError` (applied, unconfirmed). */
  failed: number;
  /** Whether any item is an error (a failure, or an applied write short of its replicas). */
  errors: boolean;
}

/** The batch's items, from its answer or from the {@link PartialBatchError} it rejected with. */
async function itemsOf<R>(batch: Promise<R[]>): Promise<Items<R>> {
  let results: Array<R | Error>;
  try {
    results = await batch;
  } catch (error) {
    const partial = partialResults(error);
    if (!Array.isArray(partial)) throw error;
    results = partial as Array<R | Error>;
  }
  let failed = 0;
  let errors = false;
  for (const item of results) {
    if (!(item instanceof Error)) continue;
    errors = true;
    if (!isReplicationShortError(item)) failed++;
  }
  return { results, failed, errors };
}

/**
 * Complete, then claim. Resolves to both lists' results when every item was answered; otherwise rejects
 * with a {@link PartialBatchError} of `{ completed, claimed }` whenever anything was applied, so that the
 * batcher gives each caller its own item's answer: a completion rejected whole (nothing applied) rejects
 * the call with its error; a claim batch rejected whole after completions were applied fails only the
 * claims, each with `claimFailure(error)`.
 * @param completeMany - the store's completions, sent first (a claim of the same key must see them).
 * @param claimMany - the store's claims.
 * @param claimFailure - what each claim's item holds when the claim batch failed whole (the store's error).
 */
export async function completeThenClaim(
  completeMany: () => Promise<boolean[]>,
  claimMany: () => Promise<ClaimResult[]>,
  claimCount: number,
  claimFailure: (error: unknown) => Error,
): Promise<CompleteAndClaimResults> {
  const completed = await itemsOf(completeMany());
  let claimed: Items<ClaimResult>;
  try {
    claimed = await itemsOf(claimMany());
  } catch (error) {
    if (completed.failed === completed.results.length) throw error;
    const failure = claimFailure(error);
    claimed = {
      results: Array.from({ length: claimCount }, () => failure),
      failed: 1,
      errors: true,
    };
  }
  const results = { completed: completed.results, claimed: claimed.results };
  if (completed.errors || claimed.errors) throw new PartialBatchError(results);
  return results as CompleteAndClaimResults;
}
