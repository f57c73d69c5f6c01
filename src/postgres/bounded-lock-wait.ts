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
import { isPool, type PgQueryable } from './client.js';
import { BEGIN_READ_COMMITTED, inOwnTransaction } from './own-transaction.js';

/** How long a bounded call waits for any lock, the records table's included, before giving up (55P03). */
export const BOUNDED_LOCK_WAIT_MS = 100;

/**
 * Run `body` on a connection of `db` inside a transaction whose `lock_timeout` is
 * {@link BOUNDED_LOCK_WAIT_MS}, at read committed, and commit. `db` that is not a pool (a single client the
 * caller shares, where a transaction would take in the caller's own statements) runs `body` as it is,
 * unbounded.
 *
 * Read committed whatever the server's, database's or role's `default_transaction_isolation`: under
 * repeatable read or serializable, a `delete` (or `purgeExpired`) that waited for a row another transaction
 * then changed (a takeover) failed with 40001, an outage, where read committed re-checks the row.
 * @throws what `body` or the database threw (55P03 past the bound); the transaction is rolled back.
 */
export function withBoundedLockWait<T>(
  db: PgQueryable,
  body: (db: PgQueryable) => Promise<T>,
): Promise<T> {
  if (!isPool(db)) return body(db);
  return inOwnTransaction(
    db,
    `${BEGIN_READ_COMMITTED}; SET LOCAL lock_timeout = '${BOUNDED_LOCK_WAIT_MS}ms'`,
    body,
  );
}
