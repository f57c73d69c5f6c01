/**
 * A statement (or a few) of the store in a transaction of its own, on a connection checked out of the pool
 * for it: how the store bounds its reads' lock waits (`./bounded-lock-wait.ts`) and runs a statement again
 * at read committed after a serialization failure (`./read-committed.ts`).
 * @module
 */
import { checkOutGuarded } from './check-out.js';
import { isDriverReadTimeout, type PgPool, type PgQueryable } from './client.js';

/**
 * How the library opens the transactions it owns: at read committed whatever the server's, database's or
 * role's `default_transaction_isolation`. Its statements are written for read committed (one atomic
 * statement each, re-checking a row another transaction changed); under repeatable read or serializable a
 * statement that waited for such a row failed with 40001, and a migrator that waited for another's lock
 * kept the snapshot taken before the wait, ran 0001 again and failed on `relation … already exists`.
 */
export const BEGIN_READ_COMMITTED = 'BEGIN ISOLATION LEVEL READ COMMITTED';

/**
 * Run `body` on a connection of `pool` inside a transaction opened by `begin` (a `BEGIN …`, and any `SET
 * LOCAL` to send in the same round trip), and commit.
 * @throws what `body` or the database threw; the transaction is rolled back, and a connection that cannot
 * roll back, or whose statement the driver stopped waiting for, is discarded rather than reused.
 */
export async function inOwnTransaction<T>(
  pool: PgPool,
  begin: string,
  body: (db: PgQueryable) => Promise<T>,
): Promise<T> {
  let broken: Error | undefined;
  const { client, unguard } = await checkOutGuarded(pool, (error) => {
    broken = error;
  });
  try {
    // A simple query may carry several statements: one round trip for BEGIN and its settings. SET LOCAL
    // ends with the transaction, so the connection goes back to the pool with its own settings.
    await client.query(begin);
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
    await client.query('ROLLBACK').catch((rollbackError: unknown) => {
      broken ??= rollbackError instanceof Error ? rollbackError : new Error(String(rollbackError));
    });
    throw error;
  } finally {
    unguard();
    client.release(broken);
  }
}
