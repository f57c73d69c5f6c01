/**
 * Whether the records table is locked against the store's writes: what a lock timeout that PostgreSQL did not
 * name a row for was waiting for. See `isKeyHeld` in `./held-key.ts`.
 * @module
 */
import type { PgQueryable } from './client.js';
import type { TableNames } from './identifiers.js';
import { blockingTableLock } from './sql.gen.js';

/**
 * Whether another session holds, or waits for, a lock on `names`' records table, one of its indexes or its
 * token sequence that the store's writes must wait for (`blocking-table-lock.sql`): an `ALTER TABLE`, a
 * `LOCK TABLE`, a `VACUUM FULL`, a migration queued behind a long transaction. One statement on the
 * catalogs, which takes no lock on the table: it cannot wait behind the lock it looks for.
 */
export async function tableLockBlocks(db: PgQueryable, names: TableNames): Promise<boolean> {
  const { rows } = await db.query(blockingTableLock, [names.schemaName, names.tableName]);
  return (rows[0] as { blocked?: unknown } | undefined)?.blocked === true;
}
