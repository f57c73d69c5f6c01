import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isStoreUnavailableError } from '../../../src/index.js';
import { migrate, postgresStore } from '../../../src/postgres/index.js';
import { env, requireService } from '../../helpers/env.js';
import { testPool, uniqueSchema } from '../../helpers/postgres-env.js';

const pool = testPool({ max: 3 });
const schemas: string[] = [];
const fresh = (label: string) => {
  const schema = uniqueSchema(label);
  schemas.push(schema);
  return schema;
};

beforeAll(async () => {
  await requireService('PostgreSQL', env.databaseUrl);
});

afterAll(async () => {
  for (const schema of schemas) await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await pool.end();
});

describe('migrate', () => {
  it('applies each migration once when several pools migrate the same table at once', async () => {
    const schema = fresh('mig');
    const pools = Array.from({ length: 4 }, () => testPool({ max: 1 }));
    try {
      const results = await Promise.all(pools.map((p) => migrate(p, { schema })));
      expect(results.filter((r) => r.applied.length > 0)).toEqual([
        {
          applied: [
            '0001_records',
            '0002_key_collation',
            '0003_batch_functions',
            '0004_complete_claim_function',
          ],
          version: 4,
        },
      ]);
      expect(results.every((r) => r.version === 4)).toBe(true);
    } finally {
      await Promise.all(pools.map((p) => p.end()));
    }
  });

  it('waits for another migrator holding the advisory lock', async () => {
    const schema = fresh('miglock');
    const holder = await pool.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [
        `idempotency-kit:migrate:${schema}.idempotency_records`,
      ]);
      let settled = false;
      const migrating = migrate(pool, { schema }).finally(() => {
        settled = true;
      });
      // The migrator blocks on the lock: the schema does not exist while the holder keeps it.
      for (let i = 0; i < 200; i++) {
        const { rows } = await pool.query(
          "SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND wait_event = 'advisory' AND query LIKE '%pg_advisory_xact_lock%' AND pid <> pg_backend_pid()",
        );
        if (rows[0].n > 0) break;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      expect(settled).toBe(false);
      await holder.query('COMMIT');
      expect((await migrating).applied).toEqual([
        '0001_records',
        '0002_key_collation',
        '0003_batch_functions',
        '0004_complete_claim_function',
      ]);
    } finally {
      holder.release();
    }
  });

  it('works on a single connected client and leaves a usable store', async () => {
    const schema = fresh('migclient');
    const client = await pool.connect();
    try {
      expect((await migrate(client, { schema, table: 'records' })).applied).toEqual([
        '0001_records',
        '0002_key_collation',
        '0003_batch_functions',
        '0004_complete_claim_function',
      ]);
      expect((await migrate(client, { schema, table: 'records' })).applied).toEqual([]);
    } finally {
      client.release();
    }
    const store = postgresStore({ pool, schema, table: 'records' });
    expect((await store.claim('k', { fingerprint: 'f', leaseMs: 1000 })).claimed).toBe(true);
  });

  it('moves a table made by 0001 to byte-order keys (COLLATE "C"), keeping its records', async () => {
    // Arrange: a table as 0001 left it, with a completed record and a live claim in it.
    const schema = fresh('migcollate');
    await migrate(pool, { schema });
    const table = `"${schema}".idempotency_records`;
    await pool.query(`ALTER TABLE ${table} ALTER COLUMN key TYPE text COLLATE "default"`);
    await pool.query(`DELETE FROM "${schema}".idempotency_records_migrations WHERE id = 2`);
    const store = postgresStore({ pool, schema });
    const done = await store.claim('done', { fingerprint: 'f', leaseMs: 60_000 });
    if (!done.claimed) throw new Error('expected a claim');
    await store.complete('done', done.token, new Uint8Array([1, 2, 3]), 60_000);
    const live = await store.claim('live', { fingerprint: 'f', leaseMs: 60_000 });
    const collation = async () =>
      (
        await pool.query(
          `SELECT collation_name FROM information_schema.columns
           WHERE table_schema = $1 AND table_name = 'idempotency_records' AND column_name = 'key'`,
          [schema],
        )
      ).rows[0]?.collation_name as string | null;
    expect(await collation()).not.toBe('C');
    // Act
    const result = await migrate(pool, { schema });
    // Assert: the column compares bytes, and both records survived with their tokens.
    expect(result.applied).toEqual(['0002_key_collation']);
    expect(await collation()).toBe('C');
    expect(await store.get('done')).toMatchObject({ status: 'completed', token: done.token });
    expect((await store.claim('live', { fingerprint: 'f', leaseMs: 60_000 })).claimed).toBe(false);
    expect(live.claimed).toBe(true);
  });

  it('fails closed with StoreUnavailableError when the database is unreachable', async () => {
    const pg = await import('pg');
    const down = new pg.default.Pool({ connectionString: 'postgres://postgres@127.0.0.1:1/test' });
    down.on('error', () => {});
    try {
      const error = await migrate(down).catch((e) => e);
      expect(isStoreUnavailableError(error)).toBe(true);
    } finally {
      await down.end();
    }
  });
});
