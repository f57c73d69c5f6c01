/**
 * `claimMany` / `completeMany` for the PostgreSQL store: a batch of distinct keys goes as one statement
 * (one round trip and one commit for all of them, which is where PostgreSQL spends most of a small
 * transaction's time); the rest keeps the contract's per-key semantics with single statements.
 * @module
 */
import type { ClaimResult } from '../core/record.js';
import { completeThenClaim } from '../store/complete-then-claim.js';
import { PartialBatchError } from '../store/partial-batch.js';
import type { ClaimRequest, CompleteAndClaimResults, CompleteRequest } from '../store/store.js';
import { isRetryableTransactionError, type PgQueryable, toStoreError } from './client.js';
import {
  claimUnlessHeld,
  DEFAULT_BUSY_RETRY_AFTER_MS,
  isKeyHeld,
  isLockTimeout,
} from './held-key.js';
import type { Operations } from './operations.js';

/** Indexes of the first occurrence of each key, and of the repeats, in input order. */
function splitRepeats(items: readonly { key: string }[]): { firsts: number[]; repeats: number[] } {
  const seen = new Set<string>();
  const firsts: number[] = [];
  const repeats: number[] = [];
  items.forEach((item, index) => {
    if (seen.has(item.key)) repeats.push(index);
    else {
      seen.add(item.key);
      firsts.push(index);
    }
  });
  return { firsts, repeats };
}

/**
 * Settle every request in input order: the distinct keys with `together` (one statement), then, one at a
 * time with `single`, the keys `together` left unsettled (`undefined`) and every repeated key, which must see
 * what its first occurrence left. On a deadlock (possible only against an outside writer that holds several
 * keys, since batches lock in key order), the distinct keys go one at a time too: a single statement holds
 * one row and cannot deadlock. So they do on a serialization failure (40001: a server, database or role whose
 * default_transaction_isolation is repeatable read or serializable, and a key's row committed by another
 * transaction after the batch's snapshot), which would otherwise fail every caller of the batch for one key
 * (a single claim runs again after one, see `claimWith` in `./operations.ts`); on a pool the store has run
 * the batch again at read committed first (`./read-committed.ts`), so that only a single client gets here. On a lock timeout for a row
 * (`heldRow`; migration 0006's `lock_timeout` on the claim batch functions: some key is
 * held by a transaction still running, a `postgresTransactional` run before its COMMIT), each distinct key
 * goes with `single`, all at once (each on its own pooled connection): the free keys are settled at once,
 * and the held one is answered by `single` without waiting for that transaction (a statement sent alone has
 * a lock timeout of its own), since the batch's callers get their results only when every key of the call
 * is settled. A lock timeout for the table's lock (an `ALTER TABLE`, a `LOCK TABLE`…) rejects the call:
 * nothing was applied, and every key alone would wait for the same lock.
 *
 * A `single` that fails is its own item's failure: the items settled before it, or beside it, were applied,
 * and their callers must get their results, not an outage (their keys would stay held a whole lease). Such a
 * call rejects with a {@link PartialBatchError} holding each item's result or error (`operation` names the
 * errors). One by one, the items after a failure are not sent (a failing server fails them too) and get its
 * error. A call of which nothing was applied rejects with the plain error.
 */
async function settle<Q extends { key: string }, R>(
  operation: string,
  requests: readonly Q[],
  single: (request: Q) => Promise<R>,
  together: (distinct: Q[]) => Promise<Array<R | undefined>>,
  heldRow: (error: unknown) => Promise<boolean>,
): Promise<R[]> {
  const results = new Array<R | Error>(requests.length);
  const { firsts, repeats } = splitRepeats(requests);
  let failure: unknown;
  let failed = 0;
  const fail = (index: number, error: unknown) => {
    failure ??= error;
    failed++;
    results[index] = toStoreError(operation, error);
  };
  const oneByOne = async (indexes: readonly number[]) => {
    for (const index of indexes) {
      if (failure !== undefined) fail(index, failure);
      else {
        try {
          results[index] = await single(requests[index]!);
        } catch (error) {
          fail(index, error);
        }
      }
    }
  };
  // Distinct keys only (their statements touch one row each). Every statement is awaited before the call
  // settles, so no claim is still being taken once its caller has been told it failed.
  const allAtOnce = async (indexes: readonly number[]) => {
    const outcomes = await Promise.allSettled(indexes.map((index) => single(requests[index]!)));
    outcomes.forEach((outcome, position) => {
      const index = indexes[position]!;
      if (outcome.status === 'fulfilled') results[index] = outcome.value;
      else fail(index, outcome.reason);
    });
  };
  let held = false;
  if (firsts.length <= 1) {
    await oneByOne(firsts);
  } else {
    let settled: Array<R | undefined>;
    try {
      settled = await together(firsts.map((index) => requests[index]!));
    } catch (error) {
      held = await heldRow(error);
      if (!held && !isRetryableTransactionError(error)) throw error;
      settled = [];
    }
    const unsettled: number[] = [];
    firsts.forEach((index, position) => {
      const result = settled[position];
      if (result === undefined) unsettled.push(index);
      else results[index] = result;
    });
    await (held ? allAtOnce(unsettled) : oneByOne(unsettled));
  }
  await oneByOne(repeats);
  if (failed === 0) return results as R[];
  if (failed === requests.length) throw failure;
  throw new PartialBatchError(results);
}

/**
 * Claim every request, in array order, as the contract asks: distinct keys in one `claim-many` statement.
 * A key whose row a running transaction holds past the lock timeout (migration 0006's on the batch, then
 * the claim's own on the key alone) is answered in progress ({@link claimUnlessHeld}: retry after
 * `busyRetryAfterMs`) rather than holding up the batch's other keys until that transaction ends; the other
 * keys are claimed as usual. A lock timeout on the table rejects the call: the store is unavailable.
 */
export function claimMany(
  ops: Operations,
  db: PgQueryable,
  requests: readonly ClaimRequest[],
  busyRetryAfterMs = DEFAULT_BUSY_RETRY_AFTER_MS,
): Promise<ClaimResult[]> {
  return settle(
    'claimMany',
    requests,
    (request) => claimUnlessHeld(ops, db, request.key, request, busyRetryAfterMs),
    async (distinct) => {
      // A key without a row saw its blocking row commit after the snapshot: it is claimed on its own.
      const settled = await ops.claimDistinct(db, distinct);
      return distinct.map((request) => settled.get(request.key));
    },
    (error) => isKeyHeld(error, db, ops.names),
  );
}

/** Complete every request, each fenced by its own token: distinct keys in one `complete-many` statement. */
export function completeMany(
  ops: Operations,
  db: PgQueryable,
  requests: readonly CompleteRequest[],
): Promise<boolean[]> {
  return settle(
    'completeMany',
    requests,
    ({ key, token, outcome, retentionMs }) => ops.complete(db, key, token, outcome, retentionMs),
    async (distinct) => {
      const completed = await ops.completeDistinct(db, distinct);
      return distinct.map((request) => completed.has(request.key));
    },
    (error) => isKeyHeld(error, db, ops.names),
  );
}

/**
 * {@link completeMany}, then {@link claimMany} (`completeThenClaim`): an item's failure is its own
 * caller's, as in each batch; a claim batch that failed whole after completions were applied fails only
 * the claims.
 */
function twoBatches(
  ops: Operations,
  db: PgQueryable,
  completes: readonly CompleteRequest[],
  claims: readonly ClaimRequest[],
  busyRetryAfterMs: number,
): Promise<CompleteAndClaimResults> {
  return completeThenClaim(
    () => completeMany(ops, db, completes),
    () => claimMany(ops, db, claims, busyRetryAfterMs),
    claims.length,
    (error) => toStoreError('claimMany', error),
  );
}

/**
 * Complete, then claim, as {@link completeMany} and {@link claimMany} would one after the other, in one
 * statement when it can: both lists of distinct keys go through the function of migration 0004, and a
 * claim the statement left unsettled is claimed again on its own, as in a claim batch. A list that repeats
 * a key, a deadlock, a serialization failure or a lock timeout for a row (the whole statement rolled back,
 * so nothing was applied), or a schema without the function sends the two batches instead; so does a lock
 * timeout for the table's lock, whose completions then wait for it rather than fail.
 */
export async function completeAndClaimMany(
  ops: Operations,
  db: PgQueryable,
  completes: readonly CompleteRequest[],
  claims: readonly ClaimRequest[],
  busyRetryAfterMs = DEFAULT_BUSY_RETRY_AFTER_MS,
): Promise<CompleteAndClaimResults> {
  const separately = () => twoBatches(ops, db, completes, claims, busyRetryAfterMs);
  if (splitRepeats(completes).repeats.length > 0 || splitRepeats(claims).repeats.length > 0) {
    return separately();
  }
  let both: Awaited<ReturnType<Operations['completeAndClaimDistinct']>>;
  try {
    both = await ops.completeAndClaimDistinct(db, completes, claims);
  } catch (error) {
    // Any lock timeout, the table's too: the completions must not give up after the handlers' effects
    // (a retry would run them again once their leases ran out behind the lock), so they go as a batch of
    // their own, which waits for the lock (no lock_timeout on complete_many); the claims then follow,
    // bounded as ever.
    if (!isRetryableTransactionError(error) && !isLockTimeout(error)) throw error;
    return separately();
  }
  if (both === undefined) return separately();
  const { completed, claimed } = both;
  // The statement applied every completion and most claims: a claim that then fails alone is its own
  // caller's failure (see `settle`), and the claims after it are not sent.
  const results = new Array<ClaimResult | Error>(claims.length);
  let failure: Error | undefined;
  let failed = 0;
  for (const [index, request] of claims.entries()) {
    const result = claimed.get(request.key);
    if (result !== undefined) results[index] = result;
    else if (failure !== undefined) results[index] = failure;
    else {
      try {
        results[index] = await claimUnlessHeld(ops, db, request.key, request, busyRetryAfterMs);
        continue;
      } catch (error) {
        failure = toStoreError('completeAndClaimMany', error);
        results[index] = failure;
      }
    }
    if (result === undefined) failed++;
  }
  const all = {
    completed: completes.map((request) => completed.has(request.key)),
    claimed: results,
  };
  if (failed > 0) throw new PartialBatchError(all);
  return all as CompleteAndClaimResults;
}
