/**
 * The PostgreSQL transactional mode when one of the handler's own statements outlives the pool's
 * `query_timeout` on the real server: node-postgres stops waiting, but the statement still runs on the
 * server, and the connection stays busy with it. The run fails after that one timeout (not a second one,
 * spent on a ROLLBACK queued behind the statement), discards the connection, and commits nothing, even
 * when the handler caught the timeout and went on.
 */
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isStoreUnavailableError } from '../../../src/index.js';
import { postgresTransactional } from '../../../src/postgres/index.js';
import { env } from '../../helpers/env.js';
import { type PostgresFixture, setupPostgres } from '../../helpers/postgres-env.js';

const QUERY_TIMEOUT_MS = 1_500;

let fx: PostgresFixture;
const newKey = (label: string) => `${label}-${randomUUID()}`;

beforeAll(async () => {
  fx = await setupPostgres('txtimeout', { max: 2 });
  await fx.pool.query(`CREATE TABLE "${fx.schema}".charges (ref text NOT NULL)`);
});

afterAll(async () => {
  await fx.dispose();
});

/** One connection at most, each statement bounded by `query_timeout`, as docs/stores/postgres.md says. */
function timedPool(): pg.Pool {
  const pool = new pg.Pool({
    connectionString: env.databaseUrl,
    max: 1,
    query_timeout: QUERY_TIMEOUT_MS,
  });
  pool.on('error', () => {});
  return pool;
}

/** The backend pid of the transaction's connection, read through `tx.client`. */
function backendOf(client: unknown): number {
  return (client as { processID: number }).processID;
}

/** Stop what an abandoned backend still runs, so that its locks go now rather than when it ends. */
async function cancelBackend(pid: number | undefined): Promise<void> {
  if (pid !== undefined) await fx.pool.query('SELECT pg_cancel_backend($1)', [pid]);
}

async function chargesFor(ref: string): Promise<number> {
  const { rows } = await fx.pool.query(
    `SELECT count(*)::int AS n FROM "${fx.schema}".charges WHERE ref = $1`,
    [ref],
  );
  return rows[0].n;
}

describe('postgresTransactional: a handler statement past query_timeout', () => {
  it('fails within that one timeout (no ROLLBACK queued behind it) and discards the connection', async () => {
    // Arrange
    const pool = timedPool();
    let pid: number | undefined;
    try {
      const tx = postgresTransactional({ pool, schema: fx.schema });
      const ref = newKey('slow');
      const key = newKey('slow');
      const startedAt = performance.now();
      // Act: the handler's statement runs for far longer than the driver waits.
      const error = await tx
        .runInTransaction({ key }, async (t) => {
          pid = backendOf(t.client);
          await t.query(`INSERT INTO "${fx.schema}".charges (ref) VALUES ($1)`, [ref]);
          await t.query('SELECT pg_sleep(60)');
          return 'charged';
        })
        .catch((e: unknown) => e);
      const elapsedMs = performance.now() - startedAt;
      // Assert: before, a ROLLBACK waited behind the sleeping statement for a second full timeout, so the
      // run could never fail in less than two (each is a timer of its own, started one after the other).
      expect(isStoreUnavailableError(error)).toBe(true);
      expect(elapsedMs).toBeLessThan(2 * QUERY_TIMEOUT_MS);
      // The connection, still busy on the server, was not put back in the pool.
      expect(pool.totalCount).toBe(0);
      await cancelBackend(pid);
      expect(await chargesFor(ref)).toBe(0);
      // The next run gets a fresh connection, and the key is free.
      const retried = await tx.runInTransaction({ key }, async (t) => backendOf(t.client));
      expect(retried).toMatchObject({ status: 'executed' });
      expect((retried as { value: number }).value).not.toBe(pid);
    } finally {
      await cancelBackend(pid);
      await pool.end();
    }
  });

  it('commits nothing when the handler caught the timeout and went on (the statement may succeed later)', async () => {
    // Arrange
    const pool = timedPool();
    let pid: number | undefined;
    try {
      const tx = postgresTransactional({ pool, schema: fx.schema });
      const ref = newKey('caught');
      const key = newKey('caught');
      // Act: the write outlives the driver's wait by half a timeout, then lands; the handler, told it
      // failed, records a fallback and returns.
      const error = await tx
        .runInTransaction({ key }, async (t) => {
          pid = backendOf(t.client);
          const sleepS = (QUERY_TIMEOUT_MS * 1.5) / 1000;
          await t
            .query(`INSERT INTO "${fx.schema}".charges (ref) SELECT $1 FROM pg_sleep(${sleepS})`, [
              ref,
            ])
            .catch(() => 'timed out: try the fallback');
          return 'fallback';
        })
        .catch((e: unknown) => e);
      // Assert: before, the completion queued behind the write, ran once it landed, and COMMIT wrote the
      // row the handler had been told was not written, with an `executed` outcome.
      expect(isStoreUnavailableError(error)).toBe(true);
      expect((error as Error).message).toContain('Query read timeout');
      await cancelBackend(pid);
      expect(await chargesFor(ref)).toBe(0);
      const retried = await tx.runInTransaction({ key }, () => 'again');
      expect(retried).toMatchObject({ status: 'executed', value: 'again' });
    } finally {
      await cancelBackend(pid);
      await pool.end();
    }
  });
});
