/**
 * The answer to a claim of a key that another transaction holds (a `postgresTransactional` run before its
 * COMMIT): in progress, retry later, once the claim has waited for the row as long as its lock timeout
 * allows (100 ms: migration 0006 for the batch functions, 0008 or `claim-bounded.sql` for a claim sent
 * alone). A lock timeout on anything but a row is an outage, never this answer.
 * See `claimMany` in `./batch.ts` and the store's `claim`.
 * @module
 */
import { type ClaimResult, RecordStatus } from '../core/record.js';
import type { ClaimOptions } from '../store/store.js';
import { type PgQueryable, SqlState, sqlState } from './client.js';
import type { TableNames } from './identifiers.js';
import type { Operations } from './operations.js';
import { tableLockBlocks } from './table-lock.js';

/** How long a caller is told to wait before retrying a key held by a running transaction, by default. */
export const DEFAULT_BUSY_RETRY_AFTER_MS = 1000;

/**
 * Whether a statement gave up waiting for a lock (SQLSTATE 55P03, past its `lock_timeout`): a row's, the
 * table's, or any other. The statement rolled back whole, so nothing of it was applied.
 * {@link isKeyHeld} tells which.
 */
export function isLockTimeout(error: unknown): boolean {
  return sqlState(error) === SqlState.LockNotAvailable;
}

// A row's ctid, `(block,offset)`: PostgreSQL formats it so in every translation of its messages.
const ROW_ID = /\(\d+,\d+\)/;

/**
 * Whether a lock timeout was, by PostgreSQL's own account, a wait for a row that another transaction holds.
 * PostgreSQL names the row it waited for in the innermost line of the error's context (`where`, its first
 * line) when it waited for the transaction that wrote it: `while inserting index tuple (0,1) in relation
 * "…"`, `while locking tuple (0,1) …`. It names nothing when it waited on the row's tuple lock (a claim
 * queued behind other claims of the same key) or on the table's lock: {@link isKeyHeld} then looks.
 */
export function isHeldRowTimeout(error: unknown): boolean {
  if (!isLockTimeout(error)) return false;
  const where = (error as { where?: unknown }).where;
  return typeof where === 'string' && ROW_ID.test(where.split('\n', 1)[0] ?? '');
}

/**
 * Whether a claim's lock timeout means that its key is in progress: it waited for a row another
 * transaction holds (the key's holder, or other claims of the same key ahead of it), not for a lock on the
 * table (an `ALTER TABLE`, `LOCK TABLE`, `VACUUM FULL`, `REINDEX`, a migration queued behind a long
 * transaction), which holds up every key: the store is unavailable, and answering "in progress" would tell
 * the caller that another request holds its key. Where PostgreSQL did not name a row
 * ({@link isHeldRowTimeout}), the table's locks are looked up on `db` (`tableLockBlocks`): only then, on the
 * rare error path, never on a claim that succeeds. A lock found is an outage; none, a row. The look-up
 * comes a moment after the timeout: a table lock released meanwhile reads as a row (the caller retries
 * either way). A look-up that fails fails closed, as an outage.
 */
export async function isKeyHeld(
  error: unknown,
  db: PgQueryable,
  names: TableNames,
): Promise<boolean> {
  if (!isLockTimeout(error)) return false;
  if (isHeldRowTimeout(error)) return true;
  return tableLockBlocks(db, names).then(
    (blocked) => !blocked,
    () => false,
  );
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
 * Claim one key alone (autocommit only, see {@link Operations.claimBounded}), and answer {@link heldKeyClaim}
 * when a running transaction holds its row past the claim's 100 ms lock timeout. Unbounded, such a claim kept
 * its pool connection until that transaction's COMMIT, and the retries of a long transaction's request, one
 * more connection each, could use up the pool. Any other lock timeout (the table's lock, see
 * {@link isKeyHeld}) rejects: the store is unavailable, not the key in progress.
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
    if (await isKeyHeld(error, db, ops.names)) return heldKeyClaim(options, retryAfterMs);
    throw error;
  }
}
