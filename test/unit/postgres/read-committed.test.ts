/**
 * `rerunAtReadCommitted` without a server: a statement refused with a serialization failure runs once more in
 * a read committed transaction of its own on a pool, as it is on a single client, and any other error is
 * rethrown unrun. The failures themselves are reproduced on a real server in
 * `test/integration/postgres/serializable-default-writes.test.ts`.
 */
import { describe, expect, it } from 'vitest';
import type { PgQueryable } from '../../../src/postgres/index.js';
import { rerunAtReadCommitted } from '../../../src/postgres/read-committed.js';

const serializationFailure = Object.assign(new Error('could not serialize access'), {
  code: '40001',
});

/**
 * A pool (or, with `pool: false`, a single client) that records what it is sent, pooled connection or not,
 * and fails the first statement sent outside a transaction with `first`.
 */
function fakeDb(first: unknown, { pool = true } = {}) {
  const sent: string[] = [];
  let failed = false;
  const query = (via: string) => async (text: string) => {
    sent.push(`${via}: ${text}`);
    if (!failed && via === 'db') {
      failed = true;
      throw first;
    }
    return { rows: [{ via }], rowCount: 1 };
  };
  const client = { query: query('connection'), release: () => sent.push('released') };
  const db = pool
    ? { totalCount: 1, connect: async () => client, query: query('db') }
    : { query: query('db') };
  return { db: db as unknown as PgQueryable, sent };
}

describe('rerunAtReadCommitted', () => {
  it('runs a statement refused with 40001 again in a read committed transaction of a pool connection', async () => {
    // Arrange
    const { db, sent } = fakeDb(serializationFailure);
    // Act
    const result = await rerunAtReadCommitted(db, (on) => on.query('SELECT 1'));
    // Assert
    expect(result.rows).toEqual([{ via: 'connection' }]);
    expect(sent).toEqual([
      'db: SELECT 1',
      'connection: BEGIN ISOLATION LEVEL READ COMMITTED',
      'connection: SELECT 1',
      'connection: COMMIT',
      'released',
    ]);
  });

  it('runs it again as it is on a client that is not a pool', async () => {
    // Arrange
    const { db, sent } = fakeDb(serializationFailure, { pool: false });
    // Act
    const result = await rerunAtReadCommitted(db, (on) => on.query('SELECT 1'));
    // Assert
    expect(result.rows).toEqual([{ via: 'db' }]);
    expect(sent).toEqual(['db: SELECT 1', 'db: SELECT 1']);
  });

  it('rethrows any other error without running the statement again', async () => {
    // Arrange: a deadlock, a lock timeout, a lost connection are answered where they were before.
    for (const code of ['40P01', '55P03', undefined]) {
      const error = Object.assign(new Error('failed'), { code });
      const { db, sent } = fakeDb(error);
      // Act
      const outcome = await rerunAtReadCommitted(db, (on) => on.query('SELECT 1')).catch(
        (e: unknown) => e,
      );
      // Assert
      expect(outcome).toBe(error);
      expect(sent).toEqual(['db: SELECT 1']);
    }
  });

  it('keeps the 40001 when the rerun on a client finds its owner transaction aborted (25P02)', async () => {
    // Arrange: a client inside its owner's transaction, which the 40001 aborted.
    const aborted = Object.assign(new Error('current transaction is aborted'), { code: '25P02' });
    let calls = 0;
    const client = {
      query: async () => {
        calls++;
        throw calls === 1 ? serializationFailure : aborted;
      },
    } as unknown as PgQueryable;
    // Act / Assert: the error its owner retries on, not the one that hides it.
    await expect(rerunAtReadCommitted(client, (on) => on.query('SELECT 1'))).rejects.toBe(
      serializationFailure,
    );
    expect(calls).toBe(2);
  });
});
