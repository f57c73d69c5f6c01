/**
 * The PostgreSQL transactional mode on a connection whose `getTransactionStatus()` cannot answer: pg's
 * native client from 8.21 has the method but asks pg-native for it, and pg-native before 3.8 (inside pg's
 * peer range) has none, so every call throws a `TypeError`. Such a connection tells no status, as another
 * driver's: runs work as usual, guarded by the statement scan only; before, every statement through `tx`
 * threw, and a failed run skipped its `ROLLBACK`, leaving the connection in the pool inside its
 * transaction with the key's claim held. On the real server, with node-postgres's client made to answer as
 * the native one does.
 */
import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { postgresTransactional } from '../../../src/postgres/index.js';
import { type PostgresFixture, setupPostgres, testPool } from '../../helpers/postgres-env.js';

let fx: PostgresFixture;
let nativeLike: pg.Pool;
const newKey = (label: string) => `pgunread-${label}-${randomUUID()}`;

beforeAll(async () => {
  fx = await setupPostgres('pgunread', { max: 2 });
  await fx.pool.query(
    `CREATE TABLE "${fx.schema}".charges (id serial PRIMARY KEY, ref text NOT NULL)`,
  );
  // One connection, so that what a run leaves on it is what the next run gets.
  nativeLike = testPool({ max: 1 });
  nativeLike.on('connect', (client) => {
    Object.assign(client, {
      getTransactionStatus: () => {
        throw new TypeError('this.native.getTransactionStatus is not a function');
      },
    });
  });
});

afterAll(async () => {
  await nativeLike.end();
  await fx.dispose();
});

async function chargesFor(ref: string): Promise<number> {
  const { rows } = await fx.pool.query(
    `SELECT count(*)::int AS n FROM "${fx.schema}".charges WHERE ref = $1`,
    [ref],
  );
  return rows[0].n;
}

describe('postgresTransactional: a connection whose transaction status cannot be read', () => {
  it('runs the handler and commits its writes with the record', async () => {
    // Arrange
    const tx = postgresTransactional({ pool: nativeLike, schema: fx.schema });
    const ref = newKey('charge');
    // Act
    const outcome = await tx.runInTransaction({ key: newKey('run') }, async (t) => {
      await t.query(`INSERT INTO "${fx.schema}".charges (ref) VALUES ($1)`, [ref]);
      return 'charged';
    });
    // Assert
    expect(outcome.status).toBe('executed');
    expect(await chargesFor(ref)).toBe(1);
  });

  it('rolls a failed run back, so the key is free for the retry and the connection out of the transaction', async () => {
    // Arrange
    const tx = postgresTransactional({ pool: nativeLike, schema: fx.schema });
    const elsewhere = postgresTransactional({ pool: fx.pool, schema: fx.schema, lockTimeoutMs: 0 });
    const key = newKey('declined');
    const ref = newKey('declined');
    // Act: the retry comes through another pool, and does not wait for a row held elsewhere.
    const failed = await tx
      .runInTransaction({ key }, async (t) => {
        await t.query(`INSERT INTO "${fx.schema}".charges (ref) VALUES ($1)`, [ref]);
        throw new Error('card declined');
      })
      .catch((error: unknown) => error);
    const retry = await elsewhere.runInTransaction({ key }, async () => 'approved');
    const { rows } = await nativeLike.query<{ open: boolean }>(
      'SELECT pg_current_xact_id_if_assigned() IS NOT NULL AS open',
    );
    // Assert
    expect((failed as Error).message).toBe('card declined');
    expect(retry.status).toBe('executed');
    expect(await chargesFor(ref)).toBe(0);
    expect(rows[0]?.open).toBe(false);
  });
});
