/**
 * The PostgreSQL source on a server, database or role whose `default_transaction_isolation` is repeatable
 * read or serializable (some payment shops set it database-wide). Each source statement runs in autocommit,
 * so it is a transaction of that level: when another relay committed a change to a row after the
 * statement's snapshot, PostgreSQL raises 40001 instead of skipping or re-checking the row as under read
 * committed. Before, every such claim failed its round as a `StoreUnavailableError` (an outage, to
 * `onError`) and the relay slept `errorDelayMs`; a late failure record failed its round too. The
 * statement applied nothing, so the source now runs it again.
 *
 * A statement-level trigger that sleeps, on the test's connections only, holds the statement between its
 * snapshot and its first row, so that the other relay's commit lands there every time.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { env } from '../../helpers/env.js';
import { type OutboxDatabase, openOutboxDatabase } from '../../helpers/outbox-postgres.js';
import { enqueue, type OutboxSource, postgresOutboxSource } from './postgres-imports.js';

let db: OutboxDatabase;

// The connections of a relay whose statements run at `level` and pause 300 ms after taking their snapshot.
function stalledPool(level: string): pg.Pool {
  const pool = new pg.Pool({
    connectionString: env.databaseUrl,
    max: 2,
    options: `-c default_transaction_isolation=${level.replace(' ', '\\ ')} -c outbox_test.stall=on`,
  });
  pool.on('error', () => {});
  return pool;
}

beforeAll(async () => {
  db = await openOutboxDatabase();
  const table = `"${db.schema}".idempotency_outbox`;
  await db.pool.query(`
    CREATE FUNCTION "${db.schema}".stall() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF current_setting('outbox_test.stall', true) = 'on' THEN PERFORM pg_sleep(0.3); END IF;
      RETURN NULL;
    END $$`);
  await db.pool.query(
    `CREATE TRIGGER stall BEFORE UPDATE ON ${table} FOR EACH STATEMENT EXECUTE FUNCTION "${db.schema}".stall()`,
  );
});

afterAll(async () => {
  await db?.close();
});

async function enqueueRows(count: number): Promise<void> {
  await db.transaction(async (tx) => {
    for (let i = 0; i < count; i++) {
      await enqueue(tx, { topic: 'isolation', payload: i }, { schema: db.schema });
    }
  });
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe.each(['repeatable read', 'serializable'])(
  'default_transaction_isolation = %s',
  (level) => {
    let stalled: pg.Pool;
    let slow: OutboxSource;
    let other: OutboxSource;

    beforeAll(async () => {
      stalled = stalledPool(level);
      // Connected beforehand, so that a statement takes its snapshot well within the tests' 100 ms.
      await stalled.query('SELECT 1');
      slow = postgresOutboxSource({ pool: stalled, schema: db.schema, listen: false });
      other = postgresOutboxSource({ pool: db.pool, schema: db.schema, listen: false });
    });

    afterAll(async () => {
      await stalled.end();
      await db.pool.query(`DELETE FROM "${db.schema}".idempotency_outbox`);
    });

    it('a claim whose snapshot predates another relay’s claim of its rows finds nothing, instead of failing as an outage', async () => {
      // Arrange: three rows; the slow relay's claim takes its snapshot, then waits in the trigger.
      await enqueueRows(3);
      const claiming = slow.claim(10, 60_000);
      await sleep(100);

      // Act: meanwhile the other relay claims the three rows and commits.
      const taken = await other.claim(10, 60_000);

      // Assert: the other relay has them; the slow claim, run again on a fresh snapshot, sees them leased.
      expect(taken).toHaveLength(3);
      await expect(claiming).resolves.toEqual([]);
    });

    it('a late failure record whose snapshot predates another relay’s claim leaves that claim alone, without failing', async () => {
      // Arrange: the slow relay claimed a row (attempt 1), its lease ran out.
      await enqueueRows(1);
      const [mine] = await slow.claim(1, 1);
      expect(mine?.attempt).toBe(1);
      await sleep(20);

      // Act: its failure record takes its snapshot and waits; meanwhile the other relay claims the row.
      const recording = slow.markFailed(mine!.rowId, 0, 'Error: late', mine!.attempt);
      await sleep(100);
      const [theirs] = await other.claim(1, 60_000);

      // Assert: the record is fenced out (the row stays the other relay's until its lease ends, not
      // claimable at once as the late record's zero backoff would make it), and it did not fail.
      expect(theirs?.attempt).toBe(2);
      await expect(recording).resolves.toBeUndefined();
      const { rows } = await db.pool.query(
        `SELECT last_error, available_at > now() + interval '59 seconds' AS leased
       FROM "${db.schema}".idempotency_outbox WHERE id = $1`,
        [mine!.rowId],
      );
      expect(rows).toEqual([{ last_error: null, leased: true }]);
    });
  },
);
