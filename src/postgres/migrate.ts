/**
 * `migrate()`: applies the numbered migrations in `migrations/` that a table has not seen yet, in one
 * transaction, under a transaction-level advisory lock keyed by schema and table. Two processes migrating
 * at once therefore never race: the second waits, then finds everything applied. Migrators of different
 * tables run in parallel and may both create a new schema: the one that loses that race uses the
 * winner's. DDL is transactional in PostgreSQL, so a failed migration leaves nothing half-done.
 * @module
 */
import { POSTGRES_STORE_OBJECTS } from '../core/derived-names.js';
import { InvalidOptionsError } from '../core/errors.js';
import { checkMigrationsOwner, type MigrationRow } from '../core/migrations-owner.js';
import {
  guardConnection,
  isPool,
  type PgPoolClient,
  type PgQueryable,
  toStoreError,
} from './client.js';
import { DEFAULT_SCHEMA, DEFAULT_TABLE, renderSql, tableNames } from './identifiers.js';
import { migrations } from './migrations.gen.js';
import { createSchemaIfMissing } from './schema.js';
import { createMigrationsTable } from './sql.gen.js';
import { postgresNamesCheck } from './taken-names.js';

/** Options of {@link migrate}. */
export interface MigrateOptions {
  /** Schema of the records table; created if missing. @default 'public' */
  schema?: string;
  /** Name of the records table. @default 'idempotency_records' */
  table?: string;
}

/** What {@link migrate} did. */
export interface MigrateResult {
  /** Names of the migrations applied by this call, in order (empty when already up to date). */
  applied: string[];
  /** Id of the newest migration now in place. */
  version: number;
}

/**
 * Bring the records table up to date.
 *
 * Pass a node-postgres `Pool` (a connection is checked out for the transaction) or a single connected
 * client that is not inside a transaction.
 * @throws StoreUnavailableError when the database fails (nothing is applied then).
 * @throws InvalidOptionsError for a bad schema or table name.
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
  let client: PgQueryable;
  let checkedOut: PgPoolClient | undefined;
  try {
    checkedOut = isPool(db) ? await db.connect() : undefined;
    client = checkedOut ?? db;
  } catch (error) {
    throw toStoreError('migrate', error);
  }
  let failure: unknown;
  const unguard = guardConnection(client, (error) => {
    failure = error;
  });
  try {
    await client.query('BEGIN');
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
    const done = new Set((rows as Array<{ id: number }>).map((row) => row.id));
    checkNames(!done.has(1));
    const applied: string[] = [];
    for (const migration of migrations) {
      if (done.has(migration.id)) continue;
      await client.query(renderSql(migration.sql, names));
      await client.query(`INSERT INTO ${names.migrationsTable} (id, name) VALUES ($1, $2)`, [
        migration.id,
        migration.name,
      ]);
      applied.push(migration.name);
    }
    await client.query('COMMIT');
    const version = Math.max(0, ...migrations.map((m) => m.id));
    return { applied, version };
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
