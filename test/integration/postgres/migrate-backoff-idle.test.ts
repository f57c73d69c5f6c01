/**
 * `migrate()` pausing between two attempts (a migration's lock timed out behind a long transaction) on a
 * connection whose role ends transactions left idle (`idle_in_transaction_session_timeout`, a common guard
 * against leaked transactions). The pause slept in this process, leaving the transaction idle: the server
 * ended the session, and the migration failed with a lost connection instead of trying again once the
 * blocking transaction had ended.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrate } from '../../../src/postgres/index.js';
import { env, requireService } from '../../helpers/env.js';
import { testPool, transactionClaims, uniqueSchema } from '../../helpers/postgres-env.js';

const pool = testPool({ max: 3 });
const schema = uniqueSchema('migidle');

beforeAll(async () => {
  await requireService('PostgreSQL', env.databaseUrl);
  // A migrated table whose 0002_key_collation is pending again: its ALTER TABLE needs ACCESS EXCLUSIVE.
  await migrate(pool, { schema });
  await pool.query(
    `ALTER TABLE "${schema}".idempotency_records ALTER COLUMN key TYPE text COLLATE "default"`,
  );
  await pool.query(`DELETE FROM "${schema}".idempotency_records_migrations WHERE id = 2`);
});

afterAll(async () => {
  await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await pool.end();
});

describe('migrate() backing off under idle_in_transaction_session_timeout', () => {
  it('keeps its transaction busy while it waits, and applies once the blocking transaction ends', async () => {
    // Arrange: the migrator's sessions end a transaction idle for 150 ms; its lock timeout is 200 ms, so
    // its first pause (200 ms) is longer. A transaction holds the table for about 300 ms.
    const migrator = new pg.Pool({
      connectionString: env.databaseUrl,
      max: 1,
      options: '-c idle_in_transaction_session_timeout=150',
    });
    migrator.on('error', () => {});
    const holder = await pool.connect();
    try {
      await holder.query('BEGIN');
      await transactionClaims(holder, schema).claim('held', { fingerprint: 'fp', leaseMs: 60_000 });
      const ended = new Promise<void>((resolve) => setTimeout(resolve, 300)).then(async () => {
        await holder.query('COMMIT');
      });
      // Act
      const result = await migrate(migrator, { schema, lockTimeoutMs: 200, lockRetries: 4 }).then(
        (value) => ({ value }),
        (error: unknown) => ({ error }),
      );
      await ended;
      // Assert: applied on a later attempt, not failed with the session the server ended.
      expect(result).toEqual({
        value: { applied: ['0002_key_collation'], version: expect.any(Number) },
      });
    } finally {
      holder.release();
      await migrator.end();
    }
  });
});

describe('migrate() backing off under a short statement_timeout', () => {
  it('sleeps in steps that fit the session statement_timeout, and applies once the blocking transaction ends', async () => {
    // Arrange: the migrator's statements are cancelled after 200 ms; with a 100 ms lock timeout its pauses
    // double past that (100, ~200, ~400 ms), and a transaction holds the table for about 700 ms. The pause
    // slept in 500 ms steps: its pg_sleep was cancelled (57014) and the migration failed.
    await pool.query(`DELETE FROM "${schema}".idempotency_records_migrations WHERE id = 2`);
    const migrator = new pg.Pool({
      connectionString: env.databaseUrl,
      max: 1,
      options: '-c statement_timeout=200',
    });
    migrator.on('error', () => {});
    const holder = await pool.connect();
    try {
      await holder.query('BEGIN');
      await transactionClaims(holder, schema).claim('held-st', {
        fingerprint: 'fp',
        leaseMs: 60_000,
      });
      const ended = new Promise<void>((resolve) => setTimeout(resolve, 700)).then(async () => {
        await holder.query('COMMIT');
      });
      // Act
      const result = await migrate(migrator, { schema, lockTimeoutMs: 100, lockRetries: 8 }).then(
        (value) => ({ value }),
        (error: unknown) => ({ error }),
      );
      await ended;
      // Assert
      expect(result).toEqual({
        value: { applied: ['0002_key_collation'], version: expect.any(Number) },
      });
    } finally {
      holder.release();
      await migrator.end();
    }
  });
});
