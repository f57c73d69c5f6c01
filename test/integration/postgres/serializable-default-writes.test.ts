/**
 * postgresStore's single-key writes (complete, extend, release, saveStep) and admin calls on connections
 * whose default_transaction_isolation is repeatable read or serializable (set for a server, a database or a
 * role), where read committed never fails them:
 * - serializable: completions and extensions of distinct keys running at the same time failed each other
 *   with SQLSTATE 40001 ("could not serialize access due to read/write dependencies among transactions":
 *   each reads the primary key's index page the other writes a new entry into), 86 of 200 completions
 *   and 102 of 200 extensions measured, each a StoreUnavailableError; so did completion batches;
 * - repeatable read and serializable: a crashed holder's completion (or extension, release, step) that
 *   waited for the key's row while another transaction took it over got 40001 when that one committed,
 *   a StoreUnavailableError where read committed answers false (fenced out); so did `delete`.
 * The store now runs such a statement again in a read committed transaction of its own. On the real server.
 */
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { postgresStore } from '../../../src/postgres/index.js';
import { env } from '../../helpers/env.js';
import {
  type PostgresFixture,
  setupPostgres,
  transactionClaims,
} from '../../helpers/postgres-env.js';

let fx: PostgresFixture;
const KEYS = 120;

beforeAll(async () => {
  fx = await setupPostgres('serdefw', { max: 4 });
});

afterAll(async () => {
  await fx.dispose();
});

/** A pool whose connections run every statement at `isolation`, as a server or role default would. */
function poolAt(isolation: string, max = 10): pg.Pool {
  const pool = new pg.Pool({
    connectionString: env.databaseUrl,
    max,
    options: `-c default_transaction_isolation=${isolation.replace(' ', '\\ ')}`,
  });
  pool.on('error', () => {});
  return pool;
}

/** Resolve as soon as a statement waits on a lock held by `holderPid`. */
async function waitForLockWait(holderPid: number): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    const { rows } = await fx.pool.query(
      "SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND $1 = ANY(pg_blocking_pids(pid))",
      [holderPid],
    );
    if ((rows[0] as { n: number }).n > 0) return;
  }
  throw new Error('no backend started waiting on a lock');
}

/** Each call's result, or the message of its rejection. */
function settled<T>(calls: Array<Promise<T>>): Promise<Array<T | string>> {
  return Promise.all(calls.map((call) => call.catch((error: Error) => String(error.message))));
}

describe('postgresStore when every transaction is serializable', () => {
  it('completes and extends claims of distinct keys sent at the same time', async () => {
    // Arrange
    const pool = poolAt('serializable');
    try {
      const store = postgresStore({ pool, schema: fx.schema });
      const keys = Array.from({ length: KEYS }, () => `k-${randomUUID()}`);
      const claims = await Promise.all(
        keys.map((key) => store.claim(key, { fingerprint: 'f', leaseMs: 60_000 })),
      );
      const tokens = claims.map((claim) => (claim.claimed ? claim.token : 0));
      // Act
      const extended = await settled(keys.map((key, i) => store.extend(key, tokens[i]!, 60_000)));
      const completed = await settled(
        keys.map((key, i) => store.complete(key, tokens[i]!, new Uint8Array([i % 256]), 60_000)),
      );
      // Assert
      expect(extended.filter((result) => result !== true)).toEqual([]);
      expect(completed.filter((result) => result !== true)).toEqual([]);
    } finally {
      await pool.end();
    }
  });

  it('completes batches of distinct keys sent at the same time', async () => {
    // Arrange
    const pool = poolAt('serializable');
    try {
      const store = postgresStore({ pool, schema: fx.schema });
      const keys = Array.from({ length: KEYS }, () => `b-${randomUUID()}`);
      const claims = await store.claimMany!(
        keys.map((key) => ({ key, fingerprint: 'f', leaseMs: 60_000 })),
      );
      const requests = keys.map((key, i) => ({
        key,
        token: claims[i]!.claimed ? claims[i]!.token : 0,
        outcome: new Uint8Array([1]),
        retentionMs: 60_000,
      }));
      // Act: pairs of keys, as the engine's batches of two calls in flight.
      const completed = await settled(
        Array.from({ length: KEYS / 2 }, (_, i) =>
          store.completeMany!(requests.slice(2 * i, 2 * i + 2)),
        ),
      );
      // Assert
      expect(completed.filter((result) => JSON.stringify(result) !== '[true,true]')).toEqual([]);
    } finally {
      await pool.end();
    }
  });
});

describe.each(['serializable', 'repeatable read'])(
  'postgresStore when every transaction is %s',
  (isolation) => {
    it('deletes a record that another transaction took over while the delete waited for it', async () => {
      // Arrange: a dead claim, taken over in a transaction of its own (the transactional mode's claim),
      // which commits once the delete waits for the row: the row changed after the delete's snapshot.
      const pool = poolAt(isolation, 4);
      const holder = await fx.pool.connect();
      try {
        const store = postgresStore({ pool, schema: fx.schema });
        const key = `d-${randomUUID()}`;
        const first = await store.claim(key, { fingerprint: 'f', leaseMs: 1 });
        if (!first.claimed) throw new Error('not claimed');
        await new Promise((resolve) => setTimeout(resolve, 20));
        await holder.query('BEGIN');
        const pid = (await holder.query('SELECT pg_backend_pid() AS pid')).rows[0].pid as number;
        const takeover = await transactionClaims(holder, fx.schema).claim(key, {
          fingerprint: 'f',
          leaseMs: 60_000,
        });
        if (!takeover.claimed) throw new Error('not taken over');
        // Act
        const pending = store.delete(key).catch((error: Error) => String(error.message));
        await waitForLockWait(pid);
        await holder.query('COMMIT');
        const result = await pending;
        // Assert: the live record taken over was removed, as asked (not an outage).
        expect(result).toBe(true);
        expect(await store.get(key)).toBeUndefined();
      } finally {
        await holder.query('ROLLBACK').catch(() => {});
        holder.release();
        await pool.end();
      }
    });
  },
);
