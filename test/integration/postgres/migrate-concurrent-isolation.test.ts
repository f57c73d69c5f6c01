/**
 * `migrate()` (the records table) from several processes at once on a server, database or role whose
 * `default_transaction_isolation` is repeatable read or serializable. The migrators queue on an advisory
 * lock; under those levels the snapshot of a migrator's transaction was taken by the lock's own statement,
 * before it waited, so once the first migrator committed the others still saw no migration recorded, ran
 * 0001 again and failed with `relation "idempotency_records" already exists` (all but one of six, measured).
 * The migration now runs its transaction at read committed, whatever the default.
 *
 * A gate connection holds the lock first, so that every migrator has taken its snapshot and waits on the
 * lock before any of them migrates: the race happens on every run, not by chance.
 */
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { migrate } from '../../../src/postgres/index.js';
import { env, requireService } from '../../helpers/env.js';
import { testPool, uniqueSchema } from '../../helpers/postgres-env.js';
import { waitUntil } from '../../helpers/wait-until.js';

const MIGRATORS = 4;
const admin = testPool({ max: 2 });
const pools: pg.Pool[] = [];
const schemas: string[] = [];

afterAll(async () => {
  for (const schema of schemas) await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await Promise.all(pools.map((pool) => pool.end()));
  await admin.end();
});

// A pool whose transactions run at `level` unless a statement says otherwise.
function poolAt(level: string): pg.Pool {
  const pool = new pg.Pool({
    connectionString: env.databaseUrl,
    max: 1,
    options: `-c default_transaction_isolation=${level.replace(' ', '\\ ')}`,
  });
  pool.on('error', () => {});
  pools.push(pool);
  return pool;
}

describe.each(['repeatable read', 'serializable'])(
  'migrate (PostgreSQL records), default_transaction_isolation = %s',
  (level) => {
    it('several migrators waiting on each other all succeed, and the migration is applied once', async () => {
      // Arrange
      await requireService('PostgreSQL', env.databaseUrl);
      const schema = uniqueSchema('rec_migrate_iso');
      schemas.push(schema);
      const migrators = Array.from({ length: MIGRATORS }, () => poolAt(level));
      // Connected beforehand (one connection each), so that their waits can be told apart from others'.
      const pids = await Promise.all(
        migrators.map(
          async (pool) => (await pool.query('SELECT pg_backend_pid() AS pid')).rows[0].pid,
        ),
      );
      const gate = await admin.connect();
      await gate.query('BEGIN');
      // The lock migrate takes (src/postgres/migrate.ts), held until the gate commits.
      await gate.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [
        `idempotency-kit:migrate:${schema}.idempotency_records`,
      ]);

      // Act
      const results = migrators.map((pool) =>
        migrate(pool, { schema }).then(
          (result) => ({ ok: true as const, applied: result.applied }),
          (error: Error) => ({ ok: false as const, error: String(error.message) }),
        ),
      );
      await waitUntil(
        'every migrator to wait on the advisory lock',
        async () => {
          const { rows } = await admin.query(
            "SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND pid = ANY($1)",
            [pids],
          );
          return rows[0].n >= MIGRATORS;
        },
        10_000,
        20,
      );
      await gate.query('COMMIT');
      gate.release();
      const settled = await Promise.all(results);

      // Assert
      expect(settled.filter((result) => !result.ok)).toEqual([]);
      const applied = settled.flatMap((result) => (result.ok ? result.applied : []));
      expect(applied[0]).toMatch(/^0001_/);
      expect(new Set(applied).size).toBe(applied.length);
      const { rows } = await admin.query(
        `SELECT name FROM "${schema}".idempotency_records_migrations ORDER BY name`,
      );
      expect(rows.map((row) => row.name)).toEqual(applied);
    });
  },
);
