/**
 * Schema migrations of the SQLite store: the numbered files in `migrations/`, applied in order, each
 * recorded in a per-table `<table>_migrations` table.
 * @module
 */
import { SQLITE_STORE_OBJECTS } from '../core/derived-names.js';
import type { Duration } from '../core/duration.js';
import { isIdempotencyError } from '../core/errors.js';
import { checkMigrationsOwner, type MigrationRow } from '../core/migrations-owner.js';
import { stringOption } from '../core/option-checks.js';
import { schemaAhead } from '../core/schema-ahead.js';
import { busyTimeoutOption, openDatabase, type SqliteDatabase, unavailable } from './client.js';
import { migrations } from './migrations.gen.js';
import * as sql from './sql.gen.js';
import { checkTableName, DEFAULT_TABLE, forTable } from './statements.js';
import { sqliteNamesCheck } from './taken-names.js';

/** Options of {@link migrate}. */
export interface MigrateOptions {
  /** Name of the records table (its companions are `<table>_meta` and `<table>_migrations`). @default 'idempotency_records' */
  table?: string;
  /** Busy timeout (ms or `'5s'`), used only when `database` is a path that `migrate` opens. @default 5000 */
  busyTimeoutMs?: Duration;
}

/** What {@link migrate} did. */
export interface MigrateResult {
  /** Names of the migrations applied by this call (empty when the schema was already current). */
  applied: string[];
  /** Id of the newest migration this release knows, now in place. */
  version: number;
  /**
   * Only when a newer release migrated the table further than this one knows: the id of the newest migration
   * recorded for it, greater than `version`. Absent otherwise.
   */
  schemaVersion?: number;
  /**
   * With `schemaVersion`: says the table is ahead of this release and names the newer migrations, for the
   * log. Nothing was applied or undone.
   */
  warning?: string;
}

// The newest migration this release knows.
const VERSION = Math.max(0, ...migrations.map((migration) => migration.id));

/**
 * Bring the store's schema up to date. Safe to call on every start, and from several processes at once:
 * the check and the migrations run in one `BEGIN IMMEDIATE` transaction, so a second process waits for the
 * first (within the busy timeout) and then finds nothing left to do. A failed migration rolls back whole.
 * A table that a newer release migrated further is left as it is and reported in `schemaVersion` and
 * `warning`, not refused, so that older code starting up during a rolling deploy keeps working.
 *
 * `database` is an open better-sqlite3 Database (left open) or a file path (opened and closed here).
 * @example
 * import Database from 'better-sqlite3';
 * import { migrate } from 'idempotency-kit/sqlite';
 * migrate(new Database('idempotency.db'));
 */
export function migrate(
  database: SqliteDatabase | string,
  options: MigrateOptions = {},
): MigrateResult {
  const table = checkTableName(stringOption(options.table, 'migrate: table', DEFAULT_TABLE));
  const busyTimeoutMs = busyTimeoutOption(options.busyTimeoutMs, 'migrate');
  if (typeof database === 'string') {
    const db = openDatabase(database, busyTimeoutMs);
    try {
      return migrate(db, { table });
    } finally {
      db.close();
    }
  }
  try {
    return database.transaction(() => applyPending(database, table)).immediate();
  } catch (error) {
    if (isIdempotencyError(error)) throw error;
    throw unavailable(`migrating table ${table}`, error);
  }
}

// Runs inside the IMMEDIATE transaction: the statements are prepared here because the migrations table
// may not exist before.
function applyPending(db: SqliteDatabase, table: string): MigrateResult {
  // Before anything is created: the migrations table's name first (taken by another kind of object, it
  // cannot even be read), then, on a first migration, every object's.
  const checkNames = sqliteNamesCheck(db, 'migrate', table, SQLITE_STORE_OBJECTS);
  checkNames(false);
  db.exec(forTable(sql.createMigrationsTable, table));
  const rows = db.prepare(forTable(sql.selectMigrations, table)).safeIntegers(false).all() as Array<
    MigrationRow & { id: number }
  >;
  checkMigrationsOwner(rows, migrations[0]!.name, 'migrate', `${table}_migrations`);
  const done = new Set(rows.map((row) => row.id));
  checkNames(!done.has(1));
  const insert = db.prepare(forTable(sql.insertMigration, table));
  const applied: string[] = [];
  for (const migration of migrations) {
    if (done.has(migration.id)) continue;
    db.exec(forTable(migration.sql, table));
    insert.run({ id: migration.id, name: migration.name, applied_at: Date.now() });
    applied.push(migration.name);
  }
  return { applied, version: VERSION, ...schemaAhead(rows, VERSION, table) };
}
