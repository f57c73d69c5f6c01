/**
 * The store's SQL (from `sql/*.sql`, inlined by `npm run gen`), bound to one table and prepared once per
 * connection. Kept apart from the store so a later transactional mode can run the same statements on the
 * user's connection, inside the user's transaction.
 * @module
 */
import { InvalidOptionsError } from '../core/errors.js';
import type { SqliteDatabase, SqliteStatement } from './client.js';
import * as sql from './sql.gen.js';

/** The table name the SQL files are written against; replaced by the configured one. */
export const DEFAULT_TABLE = 'idempotency_records';

// Identifiers are double-quoted in the SQL, and names are checked here, so any plain identifier
// (reserved words included) is safe and nothing can be injected.
const TABLE_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,47}$/;

/** Throw `InvalidOptionsError` unless `table` is a plain SQL identifier of at most 48 characters. */
export function checkTableName(table: string): string {
  if (!TABLE_NAME.test(table)) {
    throw new InvalidOptionsError(
      `sqliteStore: table must match ${TABLE_NAME} (letters, digits, underscores), got ${JSON.stringify(table)}`,
    );
  }
  return table;
}

/**
 * Rewrite SQL written against {@link DEFAULT_TABLE} (and its `_meta` / `_migrations` companions and
 * index names) for `table`.
 */
export function forTable(source: string, table: string): string {
  return table === DEFAULT_TABLE ? source : source.replaceAll(DEFAULT_TABLE, table);
}

/** A row of `select-record.sql`. */
export interface RecordRow {
  status: string;
  fingerprint: string;
  token: number;
  attempt: number;
  created_at: number;
  expires_at: number;
  completed_at: number | null;
  outcome: Uint8Array | null;
}

/** A row of `select-blocking-record.sql`: a record row, and whether its fingerprint is the claim's. */
export interface BlockingRow extends RecordRow {
  own_fingerprint: 0 | 1;
}

/** A row of `inspect-record.sql`: a record row, with its reservation and steps (JSON, or NULL). */
export interface InspectRow extends RecordRow {
  reserved_until: number | null;
  steps: string | null;
}

/** A row of `list-crashed.sql`: a crashed claim's key, then the columns of `inspect-record.sql`. */
export interface ListCrashedRow extends InspectRow {
  key: string;
}

/** A row returned by `claim.sql` when the claim won. */
export interface ClaimRow {
  token: number;
  attempt: number;
  lease_until: number;
}

/** A row of `load-steps.sql`: a JSON object, step name → base64 of the result's bytes. */
export interface StepsRow {
  steps: string;
}

/** A row of `stats.sql`. */
export interface StatsRow {
  in_progress: number;
  completed: number;
  stale_leases: number;
  oldest_created_at: number | null;
}

/** Every statement of the store, prepared on one connection for one table. */
export interface Statements {
  selectRecord: SqliteStatement;
  selectBlockingRecord: SqliteStatement;
  inspectRecord: SqliteStatement;
  listCrashed: SqliteStatement;
  claim: SqliteStatement;
  bumpToken: SqliteStatement;
  complete: SqliteStatement;
  isCompletedBy: SqliteStatement;
  release: SqliteStatement;
  extend: SqliteStatement;
  saveStep: SqliteStatement;
  loadSteps: SqliteStatement;
  deleteRecord: SqliteStatement;
  purgeExpired: SqliteStatement;
  stats: SqliteStatement;
}

const cache = new WeakMap<SqliteDatabase, Map<string, Statements>>();

/**
 * Prepare (or reuse) the statements for `table` on `db`. Needs the schema in place (run `migrate` first):
 * SQLite checks table names when it compiles a statement.
 */
export function prepareStatements(db: SqliteDatabase, table: string): Statements {
  let byTable = cache.get(db);
  if (byTable === undefined) {
    byTable = new Map();
    cache.set(db, byTable);
  }
  const cached = byTable.get(table);
  if (cached !== undefined) return cached;
  // Numbers, never bigints, whatever the connection's defaultSafeIntegers: every value fits in a double
  // (tokens are about 2^51 today).
  const prepare = (source: string) => db.prepare(forTable(source, table)).safeIntegers(false);
  const statements: Statements = {
    selectRecord: prepare(sql.selectRecord),
    selectBlockingRecord: prepare(sql.selectBlockingRecord),
    inspectRecord: prepare(sql.inspectRecord),
    listCrashed: prepare(sql.listCrashed),
    claim: prepare(sql.claim),
    bumpToken: prepare(sql.bumpToken),
    complete: prepare(sql.complete),
    isCompletedBy: prepare(sql.isCompletedBy),
    release: prepare(sql.release),
    extend: prepare(sql.extend),
    saveStep: prepare(sql.saveStep),
    loadSteps: prepare(sql.loadSteps),
    deleteRecord: prepare(sql.deleteRecord),
    purgeExpired: prepare(sql.purgeExpired),
    stats: prepare(sql.stats),
  };
  byTable.set(table, statements);
  return statements;
}
