/**
 * PostgreSQL test helpers: a pool per test file, a fresh schema per run (migrated, and dropped in
 * afterAll), all against the real server named by DATABASE_URL.
 */
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { renderSql, tableNames } from '../../src/postgres/identifiers.js';
import { migrate, type PgQueryable } from '../../src/postgres/index.js';
import { migrations } from '../../src/postgres/migrations.gen.js';
import { createOperations } from '../../src/postgres/operations.js';
import { createMigrationsTable } from '../../src/postgres/sql.gen.js';
import type { ClaimOptions } from '../../src/store/store.js';
import { env, requireService } from './env.js';

/** A pool on the test database. Pool errors on idle clients (a terminated backend) must not crash the run. */
export function testPool(options: { max?: number; applicationName?: string } = {}): pg.Pool {
  const pool = new pg.Pool({
    connectionString: env.databaseUrl,
    max: options.max ?? 5,
    application_name: options.applicationName ?? 'idempotency-kit-test',
  });
  pool.on('error', () => {});
  return pool;
}

/** A unique schema name for one test run. */
export function uniqueSchema(label: string): string {
  return `ik_${label}_${process.pid}_${randomUUID().slice(0, 8)}`;
}

/**
 * Apply the package's migrations `from`…`to` to `schema` as `migrate()` would, and only those, recording
 * each in the schema's migrations table: from 1, a schema as `migrate()` would leave it if the package had
 * only the migrations up to `to` (for tests of a later migration, and for benches that measure one).
 */
export async function applyMigrations(
  pool: PgQueryable,
  schema: string,
  from: number,
  to: number,
): Promise<void> {
  const names = tableNames(schema);
  await pool.query(`CREATE SCHEMA IF NOT EXISTS ${names.schema}`);
  await pool.query(renderSql(createMigrationsTable, names));
  for (const migration of migrations.filter((m) => m.id >= from && m.id <= to)) {
    await pool.query(renderSql(migration.sql, names));
    await pool.query(`INSERT INTO ${names.migrationsTable} (id, name) VALUES ($1, $2)`, [
      migration.id,
      migration.name,
    ]);
  }
}

/** Everything a PostgreSQL test file needs, created in beforeAll and torn down in afterAll. */
export interface PostgresFixture {
  pool: pg.Pool;
  schema: string;
  /** Drop the schema (cascade) and end the pool. */
  dispose(): Promise<void>;
}

/** Check the server is up, create a pool and a migrated schema of its own (or the one named). */
export async function setupPostgres(
  label: string,
  options: { max?: number; schema?: string } = {},
): Promise<PostgresFixture> {
  await requireService('PostgreSQL', env.databaseUrl);
  const pool = testPool({ max: options.max ?? 5 });
  const schema = options.schema ?? uniqueSchema(label);
  await migrate(pool, { schema });
  return {
    pool,
    schema,
    async dispose() {
      await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await pool.end();
    },
  };
}

/**
 * Set the lock timeout of `schema`'s batch functions (migration 0006 sets 100 ms), as an operator would
 * with `ALTER FUNCTION`: for tests that hold a row on purpose longer than that (a deadlock, a commit
 * after the batch's snapshot) and need the batch to wait for it, whatever the machine's speed.
 */
export async function setBatchLockTimeout(
  pool: pg.Pool,
  schema: string,
  timeout: string,
  table = 'idempotency_records',
): Promise<void> {
  await pool.query(
    `ALTER FUNCTION "${schema}"."${table}_claim_many"(text[], text[], float8[], float8[]) SET lock_timeout = '${timeout}'`,
  );
  await pool.query(
    `ALTER FUNCTION "${schema}"."${table}_complete_claim"(text[], bigint[], bytea[], float8[], text[], text[], float8[], float8[]) SET lock_timeout = '${timeout}'`,
  );
}

/**
 * Claims and completions on `client` with the statements the transactional mode runs (claim.sql, which sets
 * no lock timeout), for tests that hold rows on purpose in a transaction of their own. `postgresStore`
 * claims a key alone with claim-bounded.sql, whose transaction-local 100 ms lock_timeout would last until
 * such a transaction ends: the holder's later waits would then give up after 100 ms, and its transaction
 * with them, on a slow machine.
 */
export function transactionClaims(client: PgQueryable, schema: string) {
  const ops = createOperations(tableNames(schema));
  return {
    claim: (key: string, options: ClaimOptions) => ops.claim(client, key, options),
    complete: (key: string, token: number, outcome: Uint8Array, retentionMs: number) =>
      ops.complete(client, key, token, outcome, retentionMs),
  };
}
