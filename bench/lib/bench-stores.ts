/**
 * Setting up and tearing down the stores the HTTP benchmarks run against: a PostgreSQL schema migrated
 * before the run, and afterwards that schema, the run's Redis keys and its SQLite files removed.
 */
import { rmSync } from 'node:fs';
import type pg from 'pg';
import { migrations } from '../../src/postgres/migrations.gen.js';
import { applyMigrations } from '../../test/helpers/postgres-env.js';

/** Where one benchmark run keeps its data. */
export interface BenchStores {
  /** Stores the run uses (`memory`, `sqlite`, `redis`, `postgres`). */
  stores: readonly string[];
  /** PostgreSQL connection URL. */
  databaseUrl: string;
  /** The run's own PostgreSQL schema. */
  pgSchema: string;
  /** Redis connection URL. */
  redisUrl: string;
  /** The run's Redis key prefix. */
  redisPrefix: string;
  /** Temporary folders to remove afterwards (SQLite files, builds). */
  tempDirs: readonly string[];
  /** Migrate the PostgreSQL schema only up to this migration (see {@link migrateUpTo}); default: all. */
  migrateTo?: number;
}

/**
 * Bring `schema` to where `migrate()` would leave it if the package had only the migrations up to
 * `version`: a row on it measures the store as it ran before a later migration, in the same run as the
 * rows on a schema migrated to the end (`PG_AT=<version>` in the benches that take it).
 */
export async function migrateUpTo(pool: pg.Pool, schema: string, version: number): Promise<void> {
  if (!migrations.some((m) => m.id === version)) {
    throw new Error(
      `PG_AT=${version}: no such migration (${migrations.map((m) => m.id).join(', ')})`,
    );
  }
  await applyMigrations(pool, schema, 1, version);
}

/** `PG_AT`: the migration a "schema at" row stops at, when asked for. */
export function pgAtVersion(): number | undefined {
  const value = process.env.PG_AT;
  return value === undefined || value === '' ? undefined : Number(value);
}

/** What a `PG_AT` row's name says of its schema: "schema at 0006". */
export const schemaAtLabel = (version: number): string =>
  `schema at ${String(version).padStart(4, '0')}`;

/** Migrate the run's PostgreSQL schema, when PostgreSQL is used. */
export async function prepareBenchStores(run: BenchStores): Promise<void> {
  if (!run.stores.includes('postgres')) return;
  const pg = (await import('pg')).default;
  const { migrate } = await import('../../src/postgres/index.js');
  const pool = new pg.Pool({ connectionString: run.databaseUrl, max: 2 });
  if (run.migrateTo === undefined) await migrate(pool, { schema: run.pgSchema });
  else await migrateUpTo(pool, run.pgSchema, run.migrateTo);
  await pool.end();
}

/** Remove everything the run wrote. */
export async function cleanupBenchStores(run: BenchStores): Promise<void> {
  for (const dir of run.tempDirs) rmSync(dir, { recursive: true, force: true });
  if (run.stores.includes('postgres')) {
    const pg = (await import('pg')).default;
    const pool = new pg.Pool({ connectionString: run.databaseUrl, max: 1 });
    await pool.query(`DROP SCHEMA IF EXISTS "${run.pgSchema}" CASCADE`);
    await pool.end();
  }
  if (run.stores.includes('redis')) {
    const { createClient } = await import('redis');
    const client = createClient({ url: run.redisUrl });
    await client.connect();
    for await (const keys of client.scanIterator({ MATCH: `${run.redisPrefix}*`, COUNT: 1000 })) {
      if (keys.length > 0) await client.del(keys);
    }
    await client.quit();
  }
}
