/**
 * postgresStore on connections whose default_transaction_isolation is repeatable read or serializable (set
 * for a server, a database or a role): a claim that meets a concurrent duplicate's row, committed after the
 * statement's snapshot, gets SQLSTATE 40001 where read committed returns no row. The store runs it again,
 * alone or out of its batch, instead of answering an outage (for a whole batch). On the real server.
 */
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RecordStatus } from '../../../src/index.js';
import { postgresStore } from '../../../src/postgres/index.js';
import { env } from '../../helpers/env.js';
import {
  type PostgresFixture,
  setBatchLockTimeout,
  setupPostgres,
  transactionClaims,
} from '../../helpers/postgres-env.js';

let fx: PostgresFixture;
const lease = { fingerprint: 'f', leaseMs: 30_000 };

beforeAll(async () => {
  fx = await setupPostgres('serdef', { max: 4 });
  // The batch waits for the held row until it commits, rather than answering it after 100 ms.
  await setBatchLockTimeout(fx.pool, fx.schema, '10s');
});

afterAll(async () => {
  await fx.dispose();
});

/** A pool whose connections run every statement at `isolation`, as a server or role default would. */
function poolAt(isolation: string): pg.Pool {
  const pool = new pg.Pool({
    connectionString: env.databaseUrl,
    max: 4,
    options: `-c default_transaction_isolation=${isolation.replace(' ', '\\ ')}`,
  });
  pool.on('error', () => {});
  return pool;
}

/** Resolve as soon as a statement naming this run's schema waits on a lock. */
async function waitForLockWait(): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    const { rows } = await fx.pool.query(
      "SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND position($1 in query) > 0",
      [fx.schema],
    );
    if ((rows[0] as { n: number }).n > 0) return;
  }
  throw new Error('no backend started waiting on a lock');
}

/**
 * Claim `key` in a transaction of its own (the transactional mode's statement), run `contender` while it
 * holds the row, and commit once the contender waits for it: the row commits after its snapshot.
 */
async function heldThenCommitted<T>(
  key: string,
  contender: () => Promise<T>,
): Promise<{ token: number; result: T }> {
  const holder = await fx.pool.connect();
  try {
    await holder.query('BEGIN');
    const claim = await transactionClaims(holder, fx.schema).claim(key, lease);
    if (!claim.claimed) throw new Error('the holder did not claim');
    const pending = contender();
    await waitForLockWait();
    await holder.query('COMMIT');
    return { token: claim.token, result: await pending };
  } finally {
    holder.release();
  }
}

describe.each(['serializable', 'repeatable read'])(
  'postgresStore when every transaction is %s',
  (isolation) => {
    it('answers a claim that met a concurrent duplicate with its record, not an outage', async () => {
      // Arrange
      const pool = poolAt(isolation);
      try {
        const store = postgresStore({ pool, schema: fx.schema });
        const key = `single-${randomUUID()}`;
        // Act
        const { token, result } = await heldThenCommitted(key, () => store.claim(key, lease));
        // Assert: the holder's record (its token: not the "held" answer of a lock timeout).
        expect(result).toMatchObject({
          claimed: false,
          record: { status: RecordStatus.InProgress, token, fingerprint: 'f' },
        });
      } finally {
        await pool.end();
      }
    });

    it('claims the other keys of a batch, and answers the contended one with its record', async () => {
      // Arrange
      const pool = poolAt(isolation);
      try {
        const store = postgresStore({ pool, schema: fx.schema });
        const [held, free] = [`held-${randomUUID()}`, `free-${randomUUID()}`];
        // Act
        const { token, result } = await heldThenCommitted(held, () =>
          store.claimMany!([
            { key: held, ...lease },
            { key: free, ...lease },
          ]),
        );
        // Assert
        expect(result).toMatchObject([
          { claimed: false, record: { status: RecordStatus.InProgress, token } },
          { claimed: true },
        ]);
      } finally {
        await pool.end();
      }
    });

    it('applies the completions of a completions-and-claims call, and answers its contended claim', async () => {
      // Arrange
      const pool = poolAt(isolation);
      try {
        const store = postgresStore({ pool, schema: fx.schema });
        const done = `done-${randomUUID()}`;
        const held = `held-${randomUUID()}`;
        const mine = await store.claim(done, lease);
        if (!mine.claimed) throw new Error('not claimed');
        // Act
        const { token, result } = await heldThenCommitted(held, () =>
          store.completeAndClaimMany!(
            [{ key: done, token: mine.token, outcome: new Uint8Array([7]), retentionMs: 60_000 }],
            [{ key: held, ...lease }],
          ),
        );
        // Assert
        expect(result.completed).toEqual([true]);
        expect(result.claimed).toMatchObject([
          { claimed: false, record: { status: RecordStatus.InProgress, token } },
        ]);
        expect((await store.get(done))?.status).toBe(RecordStatus.Completed);
      } finally {
        await pool.end();
      }
    });
  },
);
