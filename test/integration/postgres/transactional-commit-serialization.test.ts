/**
 * `runInTransaction` at serializable when PostgreSQL refuses the COMMIT itself (SQLSTATE 40001, a write skew
 * between two runs on different keys, found only when the second commits): the run's transaction, its
 * record and the handler's writes with it, rolled back. The key is never left completed without the writes:
 * the run is retried (its handler runs again, the writes of the failed run gone), or, past `maxRetries`,
 * rejects with StoreUnavailableError and leaves the key free, so that the caller's retry runs the handler
 * once. On the real server.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isStoreUnavailableError } from '../../../src/index.js';
import {
  IsolationLevel,
  postgresStore,
  postgresTransactional,
} from '../../../src/postgres/index.js';
import { deferred } from '../../helpers/deferred.js';
import { type PostgresFixture, setupPostgres } from '../../helpers/postgres-env.js';

let fx: PostgresFixture;

beforeAll(async () => {
  fx = await setupPostgres('txcommit', { max: 6 });
  await fx.pool.query(`CREATE TABLE "${fx.schema}".ledger (entry text PRIMARY KEY)`);
});

afterAll(async () => {
  await fx.dispose();
});

/** The ledger's entries written under `prefix`. */
async function entries(prefix: string): Promise<string[]> {
  const { rows } = await fx.pool.query(
    `SELECT entry FROM "${fx.schema}".ledger WHERE starts_with(entry, $1) ORDER BY entry`,
    [prefix],
  );
  return rows.map((row) => row.entry as string);
}

/**
 * Two runs (`first`, `second`) that each read the whole ledger and then add an entry (a write skew), both
 * completed and waiting just before their COMMIT; `second` commits first, so PostgreSQL refuses the first's
 * COMMIT. Later attempts of a run go straight through. Resolves to each run's outcome or rejection.
 */
async function skewedAtCommit(maxRetries: number, prefix: string) {
  const tx = postgresTransactional({
    pool: fx.pool,
    schema: fx.schema,
    isolationLevel: IsolationLevel.Serializable,
    maxRetries,
    hooks: { onStoreError: ({ operation }) => failedAt.push(operation) },
  });
  const failedAt: string[] = [];
  const runs: string[] = [];
  const read = [deferred(), deferred()];
  const ready = [deferred(), deferred()];
  const go = [deferred(), deferred()];
  const run = (index: number, name: string) =>
    tx.runInTransaction(
      { key: `${prefix}${name}` },
      async (t) => {
        runs.push(name);
        await t.query(`SELECT count(*) FROM "${fx.schema}".ledger`);
        if (t.transactionAttempt === 1) {
          read[index]!.resolve();
          await Promise.all(read.map((gate) => gate.promise));
        }
        await t.query(`INSERT INTO "${fx.schema}".ledger VALUES ($1)`, [
          `${prefix}${name}-${t.transactionAttempt}`,
        ]);
        return name;
      },
      {
        beforeCommit: async (t) => {
          if (t.transactionAttempt > 1) return;
          ready[index]!.resolve();
          await go[index]!.promise;
        },
      },
    );
  const first = run(0, 'first').catch((error: unknown) => error);
  const second = run(1, 'second').catch((error: unknown) => error);
  await Promise.all(ready.map((gate) => gate.promise));
  go[1]!.resolve();
  const secondOutcome = await second;
  go[0]!.resolve();
  return { tx, runs, failedAt, first: await first, second: secondOutcome };
}

describe('runInTransaction at serializable, a COMMIT refused with 40001', () => {
  it('retries the run: its handler runs again, and only the retry’s writes commit with the record', async () => {
    // Arrange
    const prefix = `retry-${randomUUID()}-`;
    // Act
    const { tx, runs, first, second } = await skewedAtCommit(3, prefix);
    // Assert
    expect(second).toMatchObject({ status: 'executed', value: 'second' });
    expect(first).toMatchObject({ status: 'executed', value: 'first' });
    // Which handler starts first is the pool's choice; the first run's handler ran twice.
    expect([...runs].sort()).toEqual(['first', 'first', 'second']);
    expect(await entries(prefix)).toEqual([`${prefix}first-2`, `${prefix}second-1`]);
    const replay = await tx.runInTransaction({ key: `${prefix}first` }, async () => 'again');
    expect(replay).toEqual({ status: 'replayed', value: 'first' });
  });

  it('past maxRetries, rejects as an outage and leaves the key free: the next call runs once', async () => {
    // Arrange
    const prefix = `giveup-${randomUUID()}-`;
    // Act
    const { tx, first, failedAt } = await skewedAtCommit(0, prefix);
    // Assert: an outage (retry later), nothing of the run committed, the record included.
    expect(failedAt).toEqual(['transaction commit']);
    expect(isStoreUnavailableError(first)).toBe(true);
    expect(String((first as Error).message)).toMatch(/could not serialize/);
    expect(((first as Error).cause as { code?: string }).code).toBe('40001');
    expect(await entries(`${prefix}first`)).toEqual([]);
    const store = postgresStore({ pool: fx.pool, schema: fx.schema });
    expect(await store.get(tx.storageKeyFor(`${prefix}first`))).toBeUndefined();
    let runs = 0;
    const retried = await tx.runInTransaction({ key: `${prefix}first` }, async (t) => {
      runs++;
      await t.query(`INSERT INTO "${fx.schema}".ledger VALUES ($1)`, [`${prefix}first-retry`]);
      return 'retried';
    });
    expect(retried).toMatchObject({ status: 'executed', value: 'retried' });
    expect(runs).toBe(1);
    expect(await entries(`${prefix}first`)).toEqual([`${prefix}first-retry`]);
  });
});
