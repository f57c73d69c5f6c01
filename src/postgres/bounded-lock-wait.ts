/**
 * The store's reads and admin calls (`get`, `inspect`, `listCrashed`, `stats`, `delete`, `purgeExpired`) with
 * their lock waits bounded: while another session held or awaited a lock on the records table (an `ALTER
 * TABLE`, a `LOCK TABLE … ACCESS EXCLUSIVE`, a `VACUUM FULL`, a migration queued behind a long transaction),
 * each waited as long as it did, on a pool connection of its own: a health probe (`get`) hung, and so did
 * the pool once enough of them queued. A statement's own `set_config` comes too late for the table's lock
 * (taken while it is parsed, or its prepared plan checked), so the statement runs in a transaction of its
 * own whose `SET LOCAL lock_timeout` is in force first: past {@link BOUNDED_LOCK_WAIT_MS} it fails with
 * 55P03, nothing applied, which the store reports as StoreUnavailableError.
 *
 * Giving up is safe for these: they read, or (delete, purge) remove what the caller asked to remove and may
 * ask again; none records a handler's effect. Never for completions, extensions or steps (see migration
 * 0008), nor for `loadSteps`: a takeover that fails to load its steps is left to its lease (the engine keeps
 * them), so the retry would wait a whole lease instead of the lock's few moments.
 * The transaction costs two round trips more than the bare statement: no claim or completion calls these,
 * so a request never pays them; consumers read `inspect` on redeliveries only (consumer/given-up.ts,
 * consumer/handed-back.ts), where a timeout counts as the outage it is.
 * @module
 */
import { checkOutGuarded } from './check-out.js';
import { isDriverReadTimeout, isPool, type PgQueryable } from './client.js';

/** How long a bounded call waits for any lock, the records table's included, before giving up (55P03). */
export const BOUNDED_LOCK_WAIT_MS = 100;

/**
 * Run `body` on a connection of `db` inside a transaction whose `lock_timeout` is
 * {@link BOUNDED_LOCK_WAIT_MS}, and commit. `db` that is not a pool (a single client the caller shares, where
 * a transaction would take in the caller's own statements) runs `body` as it is, unbounded.
 * @throws what `body` or the database threw (55P03 past the bound); the transaction is rolled back.
 */
export async function withBoundedLockWait<T>(
  db: PgQueryable,
  body: (db: PgQueryable) => Promise<T>,
): Promise<T> {
  if (!isPool(db)) return body(db);
  let broken: Error | undefined;
  const { client, unguard } = await checkOutGuarded(db, (error) => {
    broken = error;
  });
  try {
    // One round trip for both: a simple query may carry several statements. SET LOCAL ends with the
    // transaction, so the connection goes back to the pool with its own setting.
    await client.query(`BEGIN; SET LOCAL lock_timeout = '${BOUNDED_LOCK_WAIT_MS}ms'`);
    const result = await body(client);
    await client.query('COMMIT');
    return result;
  } catch (error) {
    if (isDriverReadTimeout(error)) {
      // The driver stopped waiting (`query_timeout`) but the statement still runs: a ROLLBACK would queue
      // behind it and fail only after a second timeout. Discarding the connection ends the transaction.
      broken ??= error as Error;
      throw error;
    }
    // A connection that cannot roll back is discarded rather than reused.
    await client.query('ROLLBACK').catch((rollbackError: unknown) => {
      broken ??= rollbackError instanceof Error ? rollbackError : new Error(String(rollbackError));
    });
    throw error;
  } finally {
    unguard();
    client.release(broken);
  }
}
