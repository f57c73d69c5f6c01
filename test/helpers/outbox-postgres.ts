/**
 * A private PostgreSQL schema per test file for the outbox tests: a pool, the migrated outbox table, and
 * helpers to run a transaction and read rows.
 * @module
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { migrateOutbox } from '../../src/outbox/index.js';
import { env, requireService } from './env.js';

/** One test file's schema and pool. */
export interface OutboxDatabase {
  pool: pg.Pool;
  schema: string;
  /** Run `fn` inside BEGIN … COMMIT on one connection (ROLLBACK if it throws). */
  transaction<T>(fn: (client: pg.PoolClient) => Promise<T>): Promise<T>;
  /** Every outbox row, in id order. */
  rows(): Promise<
    Array<{
      id: string;
      message_id: string;
      attempts: number;
      last_error: string | null;
      sent_at: Date | null;
    }>
  >;
  /** Drop the schema and end the pool. */
  close(): Promise<void>;
}

/** Create a schema `outbox_<random>`, migrate the outbox table into it, and return the handles. */
export async function openOutboxDatabase(max = 12): Promise<OutboxDatabase> {
  await requireService('PostgreSQL', env.databaseUrl);
  const schema = `outbox_${randomBytes(5).toString('hex')}`;
  const pool = new pg.Pool({ connectionString: env.databaseUrl, max });
  // Idle pooled connections can be terminated by the server; without a listener that would crash the run.
  pool.on('error', () => {});
  await migrateOutbox(pool, { schema });
  return {
    pool,
    schema,
    async transaction(fn) {
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        const result = await fn(client);
        await client.query('COMMIT');
        return result;
      } catch (error) {
        await client.query('ROLLBACK').catch(() => {});
        throw error;
      } finally {
        client.release();
      }
    },
    async rows() {
      const { rows } = await pool.query(
        `SELECT id::text, message_id, attempts, last_error, sent_at FROM "${schema}".idempotency_outbox ORDER BY id`,
      );
      return rows;
    },
    async close() {
      await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await pool.end();
    },
  };
}
