/**
 * Setting up and tearing down the stores the HTTP benchmarks run against: a PostgreSQL schema migrated
 * before the run, and afterwards that schema, the run's Redis keys and its SQLite files removed.
 */
import { rmSync } from 'node:fs';

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
}

/** Migrate the run's PostgreSQL schema, when PostgreSQL is used. */
export async function prepareBenchStores(run: BenchStores): Promise<void> {
  if (!run.stores.includes('postgres')) return;
  const pg = (await import('pg')).default;
  const { migrate } = await import('../../src/postgres/index.js');
  const pool = new pg.Pool({ connectionString: run.databaseUrl, max: 2 });
  await migrate(pool, { schema: run.pgSchema });
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
