/**
 * `migrate()` (the records table) and `migrateOutbox()` from several processes at once on a server,
 * database or role whose `default_transaction_isolation` is repeatable read or serializable. The migrators
 * queue on an advisory lock; under those levels the snapshot of a migrator's transaction was taken by the
 * lock's own statement, before it waited, so once the first migrator committed the others still saw no
 * migration recorded, ran 0001 again and failed with `relation "idempotency_records" already exists` (or
 * `"idempotency_outbox"`; all but one of six, measured). Each migration now runs its transaction at read
 * committed, whatever the default.
 *
 * A gate connection holds the lock first, so that every migrator has taken its snapshot and waits on the
 * lock before any of them migrates: the race happens on every run, not by chance.
 */
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { migrateOutbox } from '../../../src/outbox/index.js';
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

/** A migration entry point: how it is called, the lock it takes, the table it records migrations in. */
interface Migrator {
  migrate: (pool: pg.Pool, schema: string) => Promise<{ applied: string[] }>;
  lock: (schema: string) => string;
  migrationsTable: string;
}

const migrators: Array<[string, Migrator]> = [
  [
    'migrate (records)',
    {
      migrate: (pool, schema) => migrate(pool, { schema }),
      // src/postgres/migrate.ts
      lock: (schema) => `idempotency-kit:migrate:${schema}.idempotency_records`,
      migrationsTable: 'idempotency_records_migrations',
    },
  ],
  [
    'migrateOutbox',
    {
      migrate: (pool, schema) => migrateOutbox(pool, { schema }),
      // src/outbox/postgres-outbox.ts
      lock: (schema) => `idempotency-kit:migrate-outbox:${schema}.idempotency_outbox`,
      migrationsTable: 'idempotency_outbox_migrations',
    },
  ],
];

describe.each(migrators)('%s (PostgreSQL)', (_name, migrator) => {
  describe.each(['repeatable read', 'serializable'])(
    'default_transaction_isolation = %s',
    (level) => {
      it('several migrators waiting on each other all succeed, and each migration is applied once', async () => {
        // Arrange
        await requireService('PostgreSQL', env.databaseUrl);
        const schema = uniqueSchema('migrate_iso');
        schemas.push(schema);
        const waiting = Array.from({ length: MIGRATORS }, () => poolAt(level));
        // Connected beforehand (one connection each), so that their waits can be told apart from others'.
        const pids = await Promise.all(
          waiting.map(
            async (pool) => (await pool.query('SELECT pg_backend_pid() AS pid')).rows[0].pid,
          ),
        );
        const gate = await admin.connect();
        await gate.query('BEGIN');
        // The lock the migration takes, held until the gate commits.
        await gate.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [
          migrator.lock(schema),
        ]);

        // Act
        const results = waiting.map((pool) =>
          migrator.migrate(pool, schema).then(
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

        // Assert: no migrator failed, and the migrations were applied once, by one of them.
        expect(settled.filter((result) => !result.ok)).toEqual([]);
        const applied = settled.flatMap((result) => (result.ok ? result.applied : []));
        expect(applied[0]).toMatch(/^0001_/);
        expect(new Set(applied).size).toBe(applied.length);
        const { rows } = await admin.query(
          `SELECT name FROM "${schema}".${migrator.migrationsTable} ORDER BY name`,
        );
        expect(rows.map((row) => row.name)).toEqual(applied);
      });
    },
  );
});
