/**
 * The answer to a batch claim of a key that another transaction holds (a `postgresTransactional` run
 * before its COMMIT): in progress, retry later. See migration 0006 and `claimMany` in `./batch.ts`.
 * @module
 */
import { type ClaimResult, RecordStatus } from '../core/record.js';
import type { ClaimRequest } from '../store/store.js';

/** How long a caller is told to wait before retrying a key held by a running transaction, by default. */
export const DEFAULT_BUSY_RETRY_AFTER_MS = 1000;

/**
 * A claim that found its key's row locked by a transaction still running, past migration 0006's lock
 * timeout. The holder's record is not readable (an uncommitted insert is invisible, and an uncommitted
 * update shows the version before it), so the store answers with what it does know: the key is in
 * progress. The record it returns carries the claim's own fingerprint (a mismatch, if it is one, shows on
 * the retry, once the holder has committed), no token (0: the holder's is unknown, and no caller may
 * fence with it), and a lease ending `retryAfterMs` from now, which the engine turns into the `Retry-After`
 * of its `in_progress` answer, as `postgresTransactional`'s `busyRetryAfterMs` does for the same case.
 */
export function heldKeyClaim(
  request: ClaimRequest,
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
