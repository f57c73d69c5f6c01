/**
 * Whether the records table is locked against the store's writes: what a lock timeout that PostgreSQL did not
 * name a row for was waiting for. See `isKeyHeld` in `./held-key.ts`.
 * @module
 */
import type { PgQueryable } from './client.js';
import type { TableNames } from './identifiers.js';
import { blockingTableLock } from './sql.gen.js';

/**
 * How long one look at `pg_locks` answers for its table. Claims of one key queued behind each other (a
 * storm of retries behind a transactional run holding it) each time out naming no row, and each would
 * otherwise read `pg_locks`, which takes every partition of the server's lock manager; in a real table-lock
 * incident, every failing call would. One look shared by all the callers of a moment keeps that to one
 * read per table every 100 ms; an answer at most that stale only moves a caller between 409 and 503, both
 * of which it retries.
 */
const LOOK_FRESH_MS = 100;

/** The last look per client (a pool, or a transaction's client) and table, while it is fresh or in flight. */
const looks = new WeakMap<object, Map<string, { answer: Promise<boolean>; at: number }>>();

/**
 * Whether another session holds, or waits for, a lock on `names`' records table, one of its indexes or its
 * token sequence that the store's writes must wait for (`blocking-table-lock.sql`): an `ALTER TABLE`, a
 * `LOCK TABLE`, a `VACUUM FULL`, a migration queued behind a long transaction. One statement on the
 * catalogs, which takes no lock on the table: it cannot wait behind the lock it looks for. Callers within
 * {@link LOOK_FRESH_MS} of a look share its answer (a failed look is not kept).
 */
export function tableLockBlocks(db: PgQueryable, names: TableNames): Promise<boolean> {
  let byTable = looks.get(db);
  if (byTable === undefined) {
    byTable = new Map();
    looks.set(db, byTable);
  }
  const table = `${names.schemaName}.${names.tableName}`;
  const now = performance.now();
  const recent = byTable.get(table);
  if (recent !== undefined && now - recent.at < LOOK_FRESH_MS) return recent.answer;
  const answer = look(db, names);
  const entry = { answer, at: now };
  byTable.set(table, entry);
  const forget = () => {
    if (byTable.get(table) === entry) byTable.delete(table);
  };
  answer.then(() => setTimeout(forget, LOOK_FRESH_MS).unref(), forget);
  return answer;
}

async function look(db: PgQueryable, names: TableNames): Promise<boolean> {
  const { rows } = await db.query(blockingTableLock, [names.schemaName, names.tableName]);
  return (rows[0] as { blocked?: unknown } | undefined)?.blocked === true;
}
