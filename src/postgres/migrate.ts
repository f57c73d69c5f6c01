/**
 * `migrate()`: applies the numbered migrations in `migrations/` that a table has not seen yet, in one
 * transaction, under a transaction-level advisory lock keyed by schema and table. Two processes migrating
 * at once therefore never race: the second waits, then finds everything applied. Migrators of different
 * tables run in parallel and may both create a new schema: the one that loses that race uses the
 * winner's. DDL is transactional in PostgreSQL, so a failed migration leaves nothing half-done.
 *
 * Run while the service is serving, a migration waits for its locks at most `lockTimeoutMs` at a time (see
 * `./migrate-lock.ts`), and a table that a newer release migrated further is reported as such, not failed:
 * older code keeps running on it during a rolling deploy.
 * @module
 */
import { POSTGRES_STORE_OBJECTS } from '../core/derived-names.js';
import type { Duration } from '../core/duration.js';
import { InvalidOptionsError, StoreUnavailableError } from '../core/errors.js';
import { checkMigrationsOwner, type MigrationRow } from '../core/migrations-owner.js';
import { schemaAhead } from '../core/schema-ahead.js';
import { checkOutGuarded } from './check-out.js';
import {
  guardConnection,
  isPool,
  type PgPoolClient,
  type PgQueryable,
  toStoreError,
} from './client.js';
import { isLockTimeout } from './held-key.js';
import {
  DEFAULT_SCHEMA,
  DEFAULT_TABLE,
  renderSql,
  type TableNames,
  tableNames,
} from './identifiers.js';
import {
  describeLockHolders,
  lockTimeoutMessage,
  type MigrateLockWait,
  migrateLockWait,
  migrateRetryDelayMs,
} from './migrate-lock.js';
import { migrations } from './migrations.gen.js';
import { BEGIN_READ_COMMITTED } from './own-transaction.js';
import { createSchemaIfMissing } from './schema.js';
import { createMigrationsTable } from './sql.gen.js';
import { postgresNamesCheck } from './taken-names.js';

/** Options of {@link migrate}. */
export interface MigrateOptions {
  /** Schema of the records table; created if missing. @default 'public' */
  schema?: string;
  /** Name of the records table. @default 'idempotency_records' */
  table?: string;
  /**
   * How long a migration waits for a lock (its transaction's `lock_timeout`), in ms or a duration string
   * (`'2s'`). While an `ALTER TABLE` waits behind a long transaction, every claim on the table waits behind
   * it: past this bound the migration rolls back, lets the claims through, and tries again.
   * @default 2000
   */
  lockTimeoutMs?: Duration;
  /**
   * How many times a migration that timed out waiting for a lock is tried again, after a pause that doubles
   * from `lockTimeoutMs` (at most 30 s); then `migrate()` fails, naming the transaction that held the table.
   * @default 4
   */
  lockRetries?: number;
}

/** What {@link migrate} did. */
export interface MigrateResult {
  /** Names of the migrations applied by this call, in order (empty when already up to date). */
  applied: string[];
  /** Id of the newest migration this release knows, now in place. */
  version: number;
  /**
   * Only when a newer release migrated the table further than this one knows: the id of the newest migration
   * recorded on it, greater than `version`. Absent otherwise, so the result of an up-to-date table is
   * unchanged.
   */
  schemaVersion?: number;
  /**
   * With `schemaVersion`: says the table is ahead of this release and names the newer migrations, for the
   * log. Nothing was applied or undone.
   */
  warning?: string;
}

/**
 * Bring the records table up to date.
 *
 * Pass a node-postgres `Pool` (a connection is checked out for the transaction) or a single connected
 * client that is not inside a transaction. A table that a newer release migrated further is left as it is
 * and reported in `schemaVersion` and `warning`, not refused, so that older code starting up during a rolling
 * deploy keeps working.
 * @throws StoreUnavailableError when the database fails, or a migration's lock was not granted within
 * `lockTimeoutMs` on any of its attempts (nothing is applied then).
 * @throws InvalidOptionsError for a bad schema or table name, lock timeout or retry count.
 * @example
 * await migrate(pool, { schema: 'billing' });
 */
export async function migrate(
  db: PgQueryable,
  options: MigrateOptions = {},
): Promise<MigrateResult> {
  if (db === undefined || db === null || typeof db.query !== 'function') {
    throw new InvalidOptionsError('migrate: expected a pool or client with query(text, params)');
  }
  const names = tableNames(options.schema ?? DEFAULT_SCHEMA, options.table ?? DEFAULT_TABLE);
  const wait = migrateLockWait(options);
  let failure: unknown;
  const onConnectionError = (error: Error) => {
    failure = error;
  };
  let client: PgQueryable;
  let checkedOut: PgPoolClient | undefined;
  let unguard: () => void;
  try {
    if (isPool(db)) {
      ({ client: checkedOut, unguard } = await checkOutGuarded(db, onConnectionError));
      client = checkedOut;
    } else {
      client = db;
      unguard = guardConnection(client, onConnectionError);
    }
  } catch (error) {
    throw toStoreError('migrate', error);
  }
  try {
    // Read committed: each statement after the lock must see what the migrator that held it committed
    // (see BEGIN_READ_COMMITTED).
    await client.query(BEGIN_READ_COMMITTED);
    // One lock per (schema, table): unrelated tables migrate in parallel. Released at COMMIT/ROLLBACK,
    // so it also works behind a transaction-mode connection pooler.
    await client.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [
      `idempotency-kit:migrate:${names.schemaName}.${names.tableName}`,
    ]);
    await createSchemaIfMissing(client, names.schema);
    // Before anything is created: the migrations table's name first (taken by another kind of object, it
    // cannot even be read), then, on a first migration, every object's.
    const checkNames = await postgresNamesCheck(
      client,
      'migrate',
      names.schemaName,
      names.tableName,
      POSTGRES_STORE_OBJECTS,
    );
    checkNames(false);
    await client.query(renderSql(createMigrationsTable, names));
    const { rows } = await client.query(`SELECT id, name FROM ${names.migrationsTable}`);
    checkMigrationsOwner(
      rows as MigrationRow[],
      migrations[0]!.name,
      'migrate',
      `${names.schemaName}.${names.tableName}_migrations`,
    );
    const recorded = rows as Array<{ id: number; name: string }>;
    const done = new Set(recorded.map((row) => row.id));
    checkNames(!done.has(1));
    const pending = migrations.filter((migration) => !done.has(migration.id));
    const applied = await applyPending(client, names, pending, wait);
    await client.query('COMMIT');
    const version = Math.max(0, ...migrations.map((m) => m.id));
    const table = `${names.schemaName}.${names.tableName}`;
    return { applied, version, ...schemaAhead(recorded, version, table) };
  } catch (error) {
    failure = error;
    await client.query('ROLLBACK').catch(() => {});
    // A migrations table of another kind of table is a configuration mistake, not an outage.
    if (error instanceof InvalidOptionsError) throw error;
    throw toStoreError('migrate', error);
  } finally {
    unguard();
    // A connection that failed mid-transaction is discarded rather than reused.
    checkedOut?.release(failure instanceof Error ? failure : undefined);
  }
}

/**
 * Apply `pending` in the caller's transaction, each statement waiting at most `wait.lockTimeoutMs` for a lock.
 * On a lock timeout the attempt is rolled back to a savepoint and tried again after a pause: the locks the
 * migrations took are released, so the claims queued behind them run, while the advisory lock (taken before)
 * is kept, so the other migrators of the table keep waiting for this one instead of each taking its turn at
 * stalling the claims. Nothing another migrator could change is re-read: the pending list stays true.
 */
async function applyPending(
  client: PgQueryable,
  names: TableNames,
  pending: ReadonlyArray<{ id: number; name: string; sql: string }>,
  wait: MigrateLockWait,
): Promise<string[]> {
  if (pending.length === 0) return [];
  // Transaction-local: the connection goes back to its pool with its own setting.
  await client.query(`SET LOCAL lock_timeout = ${wait.lockTimeoutMs}`);
  for (let attempt = 0; ; attempt++) {
    await client.query('SAVEPOINT idempotency_kit_migrate');
    let current = pending[0]!;
    try {
      for (const migration of pending) {
        current = migration;
        await client.query(renderSql(migration.sql, names));
        await client.query(`INSERT INTO ${names.migrationsTable} (id, name) VALUES ($1, $2)`, [
          migration.id,
          migration.name,
        ]);
      }
      await client.query('RELEASE SAVEPOINT idempotency_kit_migrate');
      return pending.map((migration) => migration.name);
    } catch (error) {
      if (!isLockTimeout(error)) throw error;
      await client.query('ROLLBACK TO SAVEPOINT idempotency_kit_migrate');
      if (attempt >= wait.lockRetries) {
        const holders = await describeLockHolders(client, names.table);
        throw new StoreUnavailableError(
          lockTimeoutMessage(current.name, names.table, wait, holders),
          { cause: error },
        );
      }
      await pauseInTransaction(client, migrateRetryDelayMs(wait.lockTimeoutMs, attempt + 1));
    }
  }
}

// The longest pg_sleep of a pause: short enough to keep the transaction busy, long enough to be few statements.
const PAUSE_STEP_MS = 500;

/**
 * Wait `ms` between two attempts without leaving the transaction idle: the server sleeps (`pg_sleep`), in
 * steps of at most {@link PAUSE_STEP_MS}. Sleeping in this process instead left the session "idle in
 * transaction" for the whole pause (up to 30 s), and a role's `idle_in_transaction_session_timeout` shorter
 * than that ended it: the migration failed with a lost connection instead of trying again. The transaction
 * holds only its advisory lock and the migrations table's meanwhile (the attempt rolled back to its savepoint).
 * Each step also fits in half the session's `statement_timeout` (read here, on the backoff path only): a
 * fixed 500 ms step under a role's `statement_timeout` of 200 ms was cancelled (57014) and failed the
 * migration; half leaves the round trip its room.
 */
async function pauseInTransaction(client: PgQueryable, ms: number): Promise<void> {
  const step = await pauseStepMs(client);
  for (let left = ms; left > 0; left -= step) {
    await client.query('SELECT pg_sleep($1::float8 / 1000)', [Math.min(left, step)]);
  }
}

/** The longest pg_sleep that the session's `statement_timeout` (in ms in `pg_settings`; 0 is none) lets run. */
async function pauseStepMs(client: PgQueryable): Promise<number> {
  const { rows } = await client.query(
    "SELECT setting::bigint AS ms FROM pg_settings WHERE name = 'statement_timeout'",
  );
  const timeoutMs = Number((rows[0] as { ms?: unknown } | undefined)?.ms ?? 0);
  if (!Number.isFinite(timeoutMs) || timeoutMs <= 0) return PAUSE_STEP_MS;
  return Math.max(1, Math.min(PAUSE_STEP_MS, Math.floor(timeoutMs / 2)));
}
