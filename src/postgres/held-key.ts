/**
 * The answer to a claim of a key that another transaction holds (a `postgresTransactional` run before its
 * COMMIT): in progress, retry later, once the claim has waited for the row as long as its lock timeout
 * allows (100 ms: migration 0006 for the batch functions, `claim-bounded.sql` for a claim sent alone).
 * See `claimMany` in `./batch.ts` and the store's `claim`.
 * @module
 */
import { type ClaimResult, RecordStatus } from '../core/record.js';
import type { ClaimOptions } from '../store/store.js';
import { type PgQueryable, SqlState, sqlState } from './client.js';
import type { Operations } from './operations.js';

/** How long a caller is told to wait before retrying a key held by a running transaction, by default. */
export const DEFAULT_BUSY_RETRY_AFTER_MS = 1000;

/**
 * Whether a claim statement gave up waiting for a row another transaction holds (SQLSTATE 55P03, past its
 * `lock_timeout`). The statement rolled back whole, so nothing of it was applied.
 */
export function isLockTimeout(error: unknown): boolean {
  return sqlState(error) === SqlState.LockNotAvailable;
}

/**
 * A claim that found its key's row locked by a transaction still running, past its lock timeout. The
 * holder's record is not readable (an uncommitted insert is invisible, and an uncommitted update shows the
 * version before it), so the store answers with what it does know: the key is in progress. The record it
 * returns carries the claim's own fingerprint (a mismatch, if it is one, shows on the retry, once the holder
 * has committed), no token (0: the holder's is unknown, and no caller may fence with it), and a lease ending
 * `retryAfterMs` from now, which the engine turns into the `Retry-After` of its `in_progress` answer, as
 * `postgresTransactional`'s `busyRetryAfterMs` does for the same case.
 */
export function heldKeyClaim(
  request: Pick<ClaimOptions, 'fingerprint'>,
  retryAfterMs: number,
  now = Date.now(),
): ClaimResult {
  return {
    claimed: false,
    record: {
      status: RecordStatus.InProgress,
      fingerprint: request.fingerprint,
      token: 0,
      leaseUntil: now + retryAfterMs,
      attempt: 1,
      createdAt: now,
    },
  };
}

/**
 * Claim one key alone with `claim-bounded.sql` (autocommit only, see {@link Operations.claimBounded}), and
 * answer {@link heldKeyClaim} when a running transaction holds its row past the statement's 100 ms lock
 * timeout. Unbounded, such a claim kept its pool connection until that transaction's COMMIT, and the retries
 * of a long transaction's request, one more connection each, could use up the pool.
 */
export async function claimUnlessHeld(
  ops: Operations,
  db: PgQueryable,
  key: string,
  options: ClaimOptions,
  retryAfterMs: number,
): Promise<ClaimResult> {
  try {
    return await ops.claimBounded(db, key, options);
  } catch (error) {
    if (isLockTimeout(error)) return heldKeyClaim(options, retryAfterMs);
    throw error;
  }
}
