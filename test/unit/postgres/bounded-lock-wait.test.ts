/**
 * `withBoundedLockWait` without a server: what it sends around a call, and that the connection goes back to
 * its pool kept (a lock timeout rolled back) or discarded (a rollback that failed). The waits themselves are
 * checked on a real server in `test/integration/postgres/bounded-reads-table-lock.test.ts`.
 */
import { describe, expect, it } from 'vitest';
import { withBoundedLockWait } from '../../../src/postgres/bounded-lock-wait.js';
import type { PgQueryable } from '../../../src/postgres/index.js';

/** A pool of one fake connection that records what it is sent and how it is released. */
function fakePool(fail: (text: string) => unknown = () => undefined) {
  const sent: string[] = [];
  const released: unknown[] = [];
  const client = {
    async query(text: string) {
      sent.push(text);
      const error = fail(text);
      if (error !== undefined) throw error;
      return { rows: [], rowCount: 0 };
    },
    release(destroy?: unknown) {
      released.push(destroy);
    },
  };
  const pool = {
    totalCount: 1,
    connect: async () => client,
    query: client.query,
  };
  return { pool: pool as unknown as PgQueryable, sent, released };
}

describe('withBoundedLockWait', () => {
  it('runs the call in a transaction whose lock_timeout is 100 ms, set first, and commits', async () => {
    // Arrange
    const { pool, sent, released } = fakePool();
    // Act
    const result = await withBoundedLockWait(pool, async (db) => {
      await db.query('SELECT 1');
      return 'answer';
    });
    // Assert
    expect(result).toBe('answer');
    expect(sent).toEqual([
      "BEGIN ISOLATION LEVEL READ COMMITTED; SET LOCAL lock_timeout = '100ms'",
      'SELECT 1',
      'COMMIT',
    ]);
    expect(released).toEqual([undefined]);
  });

  it('rolls back on a lock timeout, rethrows it, and keeps the connection', async () => {
    // Arrange
    const timeout = Object.assign(new Error('canceling statement due to lock timeout'), {
      code: '55P03',
    });
    const { pool, sent, released } = fakePool((text) =>
      text === 'SELECT 1' ? timeout : undefined,
    );
    // Act
    const outcome = withBoundedLockWait(pool, (db) => db.query('SELECT 1'));
    // Assert
    await expect(outcome).rejects.toBe(timeout);
    expect(sent).toEqual([
      "BEGIN ISOLATION LEVEL READ COMMITTED; SET LOCAL lock_timeout = '100ms'",
      'SELECT 1',
      'ROLLBACK',
    ]);
    expect(released).toEqual([undefined]);
  });

  it('discards a connection that could not roll back', async () => {
    // Arrange
    const lost = new Error('Connection terminated');
    const { pool, released } = fakePool((text) =>
      text === 'SELECT 1' || text === 'ROLLBACK' ? lost : undefined,
    );
    // Act
    const outcome = withBoundedLockWait(pool, (db) => db.query('SELECT 1'));
    // Assert
    await expect(outcome).rejects.toBe(lost);
    expect(released).toEqual([lost]);
  });

  it('runs the call as it is on a client that is not a pool (a transaction would take in its other statements)', async () => {
    // Arrange
    const sent: string[] = [];
    const client: PgQueryable = {
      query: async (text: string) => {
        sent.push(text);
        return { rows: [], rowCount: 0 };
      },
    };
    // Act
    await withBoundedLockWait(client, (db) => db.query('SELECT 1'));
    // Assert
    expect(sent).toEqual(['SELECT 1']);
  });
});
