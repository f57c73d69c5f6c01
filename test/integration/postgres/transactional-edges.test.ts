/**
 * The PostgreSQL transactional mode at its edges, on the real server: a statement the handler sends after
 * its transaction ended, a deferred constraint of the user's failing at COMMIT, a session's own
 * lock_timeout kept for the handler, and options (a pg Client for a pool among them) checked when created
 * rather than after a handler ran.
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isInvalidOptionsError, isStoreUnavailableError } from '../../../src/index.js';
import { postgresTransactional, type TransactionContext } from '../../../src/postgres/index.js';
import { env } from '../../helpers/env.js';
import { type PostgresFixture, setupPostgres, testPool } from '../../helpers/postgres-env.js';

let fx: PostgresFixture;
const newKey = (label: string) => `${label}-${randomUUID()}`;

beforeAll(async () => {
  fx = await setupPostgres('txedge', { max: 4 });
  await fx.pool.query(
    `CREATE TABLE "${fx.schema}".charges (id serial PRIMARY KEY, ref text NOT NULL,
       CONSTRAINT charges_ref_unique UNIQUE (ref) DEFERRABLE INITIALLY DEFERRED)`,
  );
});

afterAll(async () => {
  await fx.dispose();
});

async function chargesFor(ref: string): Promise<number> {
  const { rows } = await fx.pool.query(
    `SELECT count(*)::int AS n FROM "${fx.schema}".charges WHERE ref = $1`,
    [ref],
  );
  return rows[0].n;
}

describe('postgresTransactional at its edges', () => {
  it('refuses a statement the handler sends after its transaction ended: nothing is written', async () => {
    // Arrange: one connection, so the late statement would land on the connection the next run uses.
    const pool = testPool({ max: 1 });
    try {
      const tx = postgresTransactional({ pool, schema: fx.schema });
      const ref = newKey('late');
      let late: Promise<unknown> | undefined;
      let lateViaClient: Promise<unknown> | undefined;
      // Act: a branch the handler did not wait for (a timer, the loser of a Promise.all) writes later.
      const failed = await tx
        .runInTransaction({ key: newKey('late') }, async (t: TransactionContext) => {
          const write = () => `INSERT INTO "${fx.schema}".charges (ref) VALUES ('${ref}')` as const;
          late = sleep(100).then(() => t.query(write()));
          lateViaClient = sleep(100).then(() => t.client.query(write()));
          late.catch(() => {});
          lateViaClient.catch(() => {});
          throw new Error('card declined');
        })
        .catch((error: unknown) => error);
      await sleep(200);
      // Assert: the handler's error, and the late statements refused instead of committed in autocommit.
      expect((failed as Error).message).toBe('card declined');
      const lateError = await (late as Promise<unknown>).catch((error: unknown) => error);
      const clientError = await (lateViaClient as Promise<unknown>).catch(
        (error: unknown) => error,
      );
      expect(isInvalidOptionsError(lateError)).toBe(true);
      expect(isInvalidOptionsError(clientError)).toBe(true);
      expect(await chargesFor(ref)).toBe(0);
      // The connection is back in the pool, idle and usable.
      const { rows } = await pool.query('SELECT 1 AS one');
      expect(rows[0].one).toBe(1);
    } finally {
      await pool.end();
    }
  });

  it('refuses a statement sent after COMMIT, and refuses tx.client.release()', async () => {
    // Arrange
    const tx = postgresTransactional({ pool: fx.pool, schema: fx.schema });
    let kept: TransactionContext | undefined;
    let releaseError: unknown;
    // Act
    const outcome = await tx.runInTransaction({ key: newKey('kept') }, (t) => {
      kept = t;
      try {
        t.client.release();
      } catch (error) {
        releaseError = error;
      }
      return 'ok';
    });
    const after = await (kept as TransactionContext).query('SELECT 1').catch((e: unknown) => e);
    // Assert
    expect(outcome.status).toBe('executed');
    expect(isInvalidOptionsError(releaseError)).toBe(true);
    expect(isInvalidOptionsError(after)).toBe(true);
  });

  it('rethrows a deferred constraint failing at COMMIT as the handler’s error, not a store outage', async () => {
    // Arrange
    const storeErrors: string[] = [];
    const failures: boolean[] = [];
    const tx = postgresTransactional({
      pool: fx.pool,
      schema: fx.schema,
      hooks: {
        onStoreError: ({ operation }) => storeErrors.push(operation),
        onFailed: ({ stored }) => failures.push(stored),
      },
    });
    const ref = newKey('deferred');
    await fx.pool.query(`INSERT INTO "${fx.schema}".charges (ref) VALUES ($1)`, [ref]);
    const key = newKey('deferred');
    // Act: the duplicate row passes its INSERT; the deferred unique check fails at COMMIT.
    const error = await tx
      .runInTransaction({ key }, async (t) => {
        await t.query(`INSERT INTO "${fx.schema}".charges (ref) VALUES ($1)`, [ref]);
        return 'charged';
      })
      .catch((e: unknown) => e);
    // Assert
    expect(isStoreUnavailableError(error)).toBe(false);
    expect((error as { code?: string }).code).toBe('23505');
    expect(storeErrors).toEqual([]);
    expect(failures).toEqual([false]);
    expect(await chargesFor(ref)).toBe(1);
    // Nothing was committed: the key is free.
    const retry = await tx.runInTransaction({ key }, () => 'fixed');
    expect(retry.status).toBe('executed');
  });

  it('gives the handler the session’s own lock_timeout after a claim bounded by lockTimeoutMs', async () => {
    // Arrange: a session-level lock_timeout, as a pool's connect hook would set it.
    const pool = testPool({ max: 1 });
    try {
      await pool.query("SET lock_timeout = '4s'");
      const tx = postgresTransactional({ pool, schema: fx.schema });
      // Act
      const bounded = await tx.runInTransaction(
        { key: newKey('lt'), lockTimeoutMs: 0 },
        async (t) => (await t.query<{ lock_timeout: string }>('SHOW lock_timeout')).rows[0],
      );
      const after = await pool.query('SHOW lock_timeout');
      // Assert: the handler's statements wait as the session says, not forever (the server default).
      expect(bounded).toMatchObject({ status: 'executed', value: { lock_timeout: '4s' } });
      expect(after.rows[0].lock_timeout).toBe('4s');
    } finally {
      await pool.end();
    }
  });

  it('refuses a pg Client for a pool when created, connected or not, instead of failing each run', async () => {
    // Arrange: a Client has connect() too, but it is one connection and can be connected once.
    const connected = new pg.Client({ connectionString: env.databaseUrl });
    await connected.connect();
    const unconnected = new pg.Client({ connectionString: env.databaseUrl });
    try {
      for (const client of [connected, unconnected]) {
        // Act
        const error = (() => {
          try {
            postgresTransactional({ pool: client as never, schema: fx.schema });
          } catch (thrown) {
            return thrown;
          }
          return undefined;
        })();
        // Assert
        expect(isInvalidOptionsError(error)).toBe(true);
        expect((error as Error).message).toMatch(/pg Client; pass a pg Pool/);
      }
    } finally {
      await connected.end();
    }
  });

  it('refuses bad options when created, before any handler runs', async () => {
    // Arrange
    const base = { pool: fx.pool, schema: fx.schema };
    const bad: Array<Record<string, unknown>> = [
      { codec: {} },
      { namespace: 7 },
      { busyRetryAfterMs: -1 },
      { busyRetryAfterMs: Number.NaN },
      { busyRetryAfterMs: '1000' },
      { onRetry: 'log' },
      { prepare: 'yes' },
    ];
    // Act / Assert
    for (const options of bad) {
      const error = (() => {
        try {
          postgresTransactional({ ...base, ...options } as never);
        } catch (thrown) {
          return thrown;
        }
        return undefined;
      })();
      expect(isInvalidOptionsError(error), JSON.stringify(options)).toBe(true);
    }
    // A bad per-call codec is refused before the handler runs.
    const tx = postgresTransactional(base);
    let runs = 0;
    const error = await tx
      .runInTransaction({ key: newKey('codec'), codec: {} as never }, () => {
        runs++;
        return 1;
      })
      .catch((e: unknown) => e);
    expect(isInvalidOptionsError(error)).toBe(true);
    expect(runs).toBe(0);
  });
});
