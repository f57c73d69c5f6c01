/**
 * `migrate()` run while the service is serving: a migration that needs a strong lock on the records table
 * (here 0002's ALTER TABLE, ACCESS EXCLUSIVE) behind a long transaction that touched the table. Waiting
 * for its lock, the migration queues every later claim behind it; it must give up after its lock timeout,
 * let the claims through, and retry a bounded number of times.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isStoreUnavailableError } from '../../../src/index.js';
import { migrate, postgresStore } from '../../../src/postgres/index.js';
import { env, requireService } from '../../helpers/env.js';
import { testPool, transactionClaims, uniqueSchema } from '../../helpers/postgres-env.js';

const pool = testPool({ max: 6 });
const schemas: string[] = [];

beforeAll(async () => {
  await requireService('PostgreSQL', env.databaseUrl);
});

afterAll(async () => {
  for (const schema of schemas) await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await pool.end();
});

/** A migrated table whose 0002_key_collation is pending again: its ALTER TABLE needs ACCESS EXCLUSIVE. */
async function tableWith0002Pending(label: string): Promise<string> {
  const schema = uniqueSchema(label);
  schemas.push(schema);
  await migrate(pool, { schema });
  await pool.query(
    `ALTER TABLE "${schema}".idempotency_records ALTER COLUMN key TYPE text COLLATE "default"`,
  );
  await pool.query(`DELETE FROM "${schema}".idempotency_records_migrations WHERE id = 2`);
  return schema;
}

/** Resolves once a backend is waiting for a table lock on a statement that names `schema`. */
async function migratorWaiting(schema: string): Promise<void> {
  for (let i = 0; i < 500; i++) {
    const { rows } = await pool.query(
      `SELECT count(*)::int AS n FROM pg_stat_activity
       WHERE wait_event_type = 'Lock' AND wait_event = 'relation' AND query LIKE '%ALTER TABLE%'
         AND query LIKE '%' || $1 || '%'`,
      [schema],
    );
    if (rows[0].n > 0) return;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error('the migration never waited for its lock');
}

/** A transaction holding a claimed row (and ROW EXCLUSIVE on the table), as postgresTransactional does. */
async function openHolder(schema: string) {
  const holder = await pool.connect();
  await holder.query('BEGIN');
  await transactionClaims(holder, schema).claim('held', { fingerprint: 'fp', leaseMs: 60_000 });
  const pid = (await holder.query('SELECT pg_backend_pid() AS pid')).rows[0].pid as number;
  return { holder, pid };
}

describe('migrate() behind a long transaction', () => {
  it('does not stall claims past its lock timeout, retries, then fails naming the blocking transaction', async () => {
    // Arrange: a long transaction on the table, and a migration needing ACCESS EXCLUSIVE on it.
    const schema = await tableWith0002Pending('miglockwait');
    const store = postgresStore({ pool, schema });
    const { holder, pid } = await openHolder(schema);
    try {
      const migrating = migrate(pool, { schema, lockTimeoutMs: 200, lockRetries: 3 }).then(
        (result) => ({ result, error: undefined }),
        (error: unknown) => ({ result: undefined, error }),
      );
      await migratorWaiting(schema);
      // Act: claims of fresh keys for 2 s, while the holder keeps its transaction open.
      const start = Date.now();
      let lastClaimed = start;
      let longestStall = 0;
      let claimed = 0;
      let longestCall = 0;
      for (let i = 0; Date.now() - start < 2_000; i++) {
        // A claim queued behind the migration's lock request gives up after its own 100 ms lock timeout
        // (claim_one's, migration 0008, which bounds the table's lock too) and rejects as the store
        // unavailable: a 503, never a hang. Bounded here as well, so that a hang fails the test.
        const callStart = Date.now();
        const result = await Promise.race([
          store.claim(`k${i}`, { fingerprint: 'fp', leaseMs: 60_000 }),
          new Promise<'stalled'>((resolve) => setTimeout(() => resolve('stalled'), 1_500)),
        ]).catch((error: unknown) => {
          if (!isStoreUnavailableError(error)) throw error;
          return 'unavailable' as const;
        });
        longestCall = Math.max(longestCall, Date.now() - callStart);
        if (result === 'stalled') {
          longestStall = Math.max(longestStall, Date.now() - lastClaimed);
          break;
        }
        if (result === 'unavailable') continue;
        if (result.claimed) {
          claimed++;
          longestStall = Math.max(longestStall, Date.now() - lastClaimed);
          lastClaimed = Date.now();
        }
      }
      longestStall = Math.max(longestStall, Date.now() - lastClaimed);
      // Assert: claims went through between the migration's attempts (each gives up after 200 ms), and no
      // claim waited for the migration's lock request past its own bound.
      expect(claimed).toBeGreaterThan(0);
      expect(longestStall).toBeLessThan(1_000);
      expect(longestCall).toBeLessThan(1_000);
      // The migration gave up after its 4 attempts, rolled back, and says who blocked it and what to do.
      // Bounded: a migration that never gives up would wait here for the holder's COMMIT.
      const { result, error } = await Promise.race([
        migrating,
        new Promise<{ result: undefined; error: Error }>((resolve) =>
          setTimeout(
            () => resolve({ result: undefined, error: new Error('still waiting') }),
            5_000,
          ),
        ),
      ]);
      expect(result).toBeUndefined();
      expect(isStoreUnavailableError(error)).toBe(true);
      const message = (error as Error).message;
      expect(message).toMatch(/0002_key_collation/);
      expect(message).toMatch(/4 attempts/);
      expect(message).toMatch(/lock_timeout|lock timeout/);
      expect(message).toContain(`pid ${pid}`);
      expect(message).toMatch(/idle in transaction/);
      expect(message).toMatch(/run migrate again/);
      expect(
        (await pool.query(`SELECT id FROM "${schema}".idempotency_records_migrations WHERE id = 2`))
          .rowCount,
      ).toBe(0);
    } finally {
      await holder.query('COMMIT');
      holder.release();
    }
    // Once the transaction has ended, the migration applies.
    expect((await migrate(pool, { schema })).applied).toEqual(['0002_key_collation']);
  });

  it('applies on a later attempt once the blocking transaction ends, keeping concurrent migrators serialized', async () => {
    const schema = await tableWith0002Pending('miglockretry');
    const { holder } = await openHolder(schema);
    const others = [testPool({ max: 1 }), testPool({ max: 1 })];
    let first: Promise<{ applied: string[] }>;
    let rest: Promise<Array<{ applied: string[] }>>;
    try {
      first = migrate(pool, { schema, lockTimeoutMs: 150, lockRetries: 10 });
      await migratorWaiting(schema);
      // Two more migrators of the same table wait for the advisory lock, not for the table.
      rest = Promise.all(others.map((p) => migrate(p, { schema, lockTimeoutMs: 150 })));
      // Past the first attempt's lock timeout: the migrator is backing off, or retrying.
      await new Promise((resolve) => setTimeout(resolve, 400));
      const { rows } = await pool.query(
        `SELECT count(*)::int AS n FROM pg_stat_activity
         WHERE wait_event_type = 'Lock' AND wait_event = 'relation' AND query LIKE '%' || $1 || '%'`,
        [schema],
      );
      expect(rows[0].n).toBeLessThanOrEqual(1);
    } finally {
      await holder.query('COMMIT');
      holder.release();
    }
    try {
      expect((await first).applied).toEqual(['0002_key_collation']);
      expect((await rest).map((r) => r.applied)).toEqual([[], []]);
    } finally {
      await Promise.all(others.map((p) => p.end()));
    }
  });

  it('refuses a lock timeout or a retry count that is not a positive number', async () => {
    // A schema of its own: were the options ignored, nothing else is migrated.
    const schema = uniqueSchema('miglockopts');
    schemas.push(schema);
    await expect(migrate(pool, { schema, lockTimeoutMs: 0 })).rejects.toThrow(/lockTimeoutMs/);
    await expect(migrate(pool, { schema, lockRetries: -1 })).rejects.toThrow(/lockRetries/);
  });
});
