/**
 * How the PostgreSQL outbox source runs its statements: each alone, in autocommit (a transaction of its
 * own), run again (at read committed) when PostgreSQL refused it for a concurrent change it applied nothing
 * of.
 * @module
 */
import {
  isPool,
  isRetryableTransactionError,
  type PgPool,
  SqlState,
  sqlState,
} from '../postgres/client.js';
import { BEGIN_READ_COMMITTED, inOwnTransaction } from '../postgres/own-transaction.js';
import type { PgQueryable, PgResult } from './clients.js';
import { outboxStoreError } from './errors.js';

/**
 * Runs of one statement before its serialization failure is reported. Each failure means another relay
 * committed a change to one of its rows while it ran; a fresh run sees that change. More than a handful in
 * a row means something else is wrong.
 */
const STATEMENT_ATTEMPTS = 10;

/**
 * The next run waits a random delay of up to this many ms times the runs so far. Run again at once, the
 * relays whose claims had conflicted mostly conflicted again: under serializable, any two claims that
 * overlap in time do (each reads rows the other takes), and six relays then failed a claim in ten runs
 * about as often as without any.
 */
const RETRY_SPREAD_MS = 20;

/**
 * Run `query` on `pool`, again on a serialization failure (40001) or a deadlock (40P01), at most
 * {@link STATEMENT_ATTEMPTS} times; any other failure, or the last one, becomes the `StoreUnavailableError`
 * of `operation`. After a serialization failure, on a pool, the next runs are at read committed, each in a
 * transaction of its own (`BEGIN ISOLATION LEVEL READ COMMITTED`), where PostgreSQL raises none.
 *
 * Why: on a server, database or role whose `default_transaction_isolation` is repeatable read or
 * serializable, every autocommit statement runs at that level. A claim whose snapshot predates another
 * relay's committed claim of a candidate row, or a late failure record whose snapshot predates the claim
 * that fenced it out, then fails with 40001 where read committed re-checks the row (and skips it, or
 * leaves it alone). The statement was a transaction of its own and applied nothing, so running it again is
 * safe; reported instead, each one was an outage to `onError`, a round lost, and `errorDelayMs` slept.
 * Run again at serializable, it kept failing: any two claims that overlap in time conflict there, and six
 * relays draining 3,000 rows had 2 to 4 claims fail all 10 runs, every time. Read committed only after a
 * failure: a `BEGIN` and a `COMMIT` on every statement would cost two round trips more where the default is
 * read committed, as it is almost everywhere.
 */
export async function runStatement(
  pool: PgQueryable,
  operation: string,
  query: string,
  values: unknown[],
): Promise<PgResult> {
  let readCommitted = false;
  for (let attempt = 1; ; attempt++) {
    try {
      return readCommitted
        ? await inOwnTransaction(pool as PgPool, BEGIN_READ_COMMITTED, (db) =>
            db.query(query, values),
          )
        : await pool.query(query, values);
    } catch (error) {
      if (attempt >= STATEMENT_ATTEMPTS || !isRetryableTransactionError(error)) {
        throw outboxStoreError(operation, error);
      }
      // A single client that is not a pool (shared with its owner) runs it again as it is.
      if (sqlState(error) === SqlState.SerializationFailure && isPool(pool)) {
        readCommitted = true;
        continue;
      }
      await new Promise((resolve) =>
        setTimeout(resolve, Math.random() * RETRY_SPREAD_MS * attempt),
      );
    }
  }
}
