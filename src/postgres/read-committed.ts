/**
 * The store's statements sent alone (autocommit) run at the `default_transaction_isolation` the server, the
 * database or the role sets. Under serializable, completions and extensions of distinct keys sent at the
 * same time failed each other with SQLSTATE 40001 ("could not serialize access due to read/write
 * dependencies among transactions": each reads the primary key's index page that the other writes a new
 * entry into; 86 of 200 completions and 102 of 200 extensions, measured); under repeatable read too, a
 * statement that waited for a row another transaction then changed (a takeover) failed where read
 * committed re-checks the row. Each was a `StoreUnavailableError`: a completion retried until its lease ran
 * out, then lost (the record left in progress, and the request's retry ran the handler again once the lease
 * ended), a heartbeat missed, a batch's callers all failed.
 *
 * A statement sent alone was a transaction of its own, and a 40001 means it applied nothing: so it runs
 * again, once, in a transaction that says `BEGIN ISOLATION LEVEL READ COMMITTED`, where PostgreSQL never
 * raises one. Only then: a `BEGIN` and a `COMMIT` on every call would cost two round trips more where the
 * default is read committed, as it is almost everywhere.
 * @module
 */
import { isPool, type PgQueryable, SqlState, sqlState } from './client.js';
import { BEGIN_READ_COMMITTED, inOwnTransaction } from './own-transaction.js';

/**
 * Run `send` on `db`, and once more at read committed if PostgreSQL refused it with a serialization failure
 * (40001): in a transaction of its own on a connection of `db` when it is a pool, as it is otherwise (a
 * single client that the caller shares, where a transaction would take in the caller's own statements; a
 * fresh snapshot sees the change that failed it). For statements sent in autocommit only: inside a
 * transaction, a 40001 has aborted it, and only its owner can run it again.
 * @throws what the last run threw.
 */
export async function rerunAtReadCommitted<T>(
  db: PgQueryable,
  send: (db: PgQueryable) => Promise<T>,
): Promise<T> {
  try {
    return await send(db);
  } catch (error) {
    if (sqlState(error) !== SqlState.SerializationFailure) throw error;
    if (isPool(db)) return inOwnTransaction(db, BEGIN_READ_COMMITTED, send);
    return send(db).catch((again: unknown) => {
      // A client inside its owner's transaction (not the store's way, but possible): the 40001 aborted it,
      // and the rerun's 25P02 ("current transaction is aborted") would hide the error its owner retries on.
      throw sqlState(again) === SqlState.InFailedTransaction ? error : again;
    });
  }
}
