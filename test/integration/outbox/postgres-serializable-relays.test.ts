/**
 * Several busy relays on a server, database or role whose `default_transaction_isolation` is serializable.
 * Each source statement runs in autocommit, so at that level, and under serializable any two claims that
 * overlap in time conflict (each reads rows the other takes): PostgreSQL refuses one with 40001. The source
 * ran such a statement again at serializable, up to 10 times, and six relays draining 3,000 rows still had
 * 2 to 4 claims fail all 10 runs in every run measured, each an outage to `onError` and a round lost. After a
 * serialization failure the source now runs the statement in a read committed transaction of its own,
 * where PostgreSQL raises none. On the real server.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { env } from '../../helpers/env.js';
import { type OutboxDatabase, openOutboxDatabase } from '../../helpers/outbox-postgres.js';
import { enqueue, postgresOutboxSource } from './postgres-imports.js';

const RELAYS = 6;
const ROWS = 4000;
let db: OutboxDatabase;
const pools: pg.Pool[] = [];

beforeAll(async () => {
  db = await openOutboxDatabase();
  await db.transaction(async (tx) => {
    for (let i = 0; i < ROWS; i++) {
      await enqueue(tx, { topic: 'serializable', payload: i }, { schema: db.schema });
    }
  });
});

afterAll(async () => {
  await Promise.all(pools.map((pool) => pool.end()));
  await db?.close();
});

describe('postgresOutboxSource, default_transaction_isolation = serializable', () => {
  it('several relays claiming and marking at once drain the outbox without a failed statement', async () => {
    // Arrange
    const errors: string[] = [];
    const published = new Map<string, number>();
    const relay = async () => {
      const pool = new pg.Pool({
        connectionString: env.databaseUrl,
        max: 2,
        options: '-c default_transaction_isolation=serializable',
      });
      pool.on('error', () => {});
      pools.push(pool);
      const source = postgresOutboxSource({ pool, schema: db.schema, listen: false });
      for (let empty = 0; empty < 3; ) {
        try {
          const batch = await source.claim(20, 60_000);
          if (batch.length === 0) empty++;
          for (const message of batch) {
            published.set(message.id, (published.get(message.id) ?? 0) + 1);
          }
          if (batch.length > 0) await source.markSent(batch.map((message) => message.rowId));
        } catch (error) {
          errors.push(String((error as Error).message));
        }
      }
    };
    // Act
    await Promise.all(Array.from({ length: RELAYS }, relay));
    // Assert
    expect(errors).toEqual([]);
    expect(published.size).toBe(ROWS);
    expect([...published.values()].filter((count) => count !== 1)).toEqual([]);
    const { rows } = await db.pool.query(
      `SELECT count(*)::int AS n FROM "${db.schema}".idempotency_outbox WHERE sent_at IS NULL`,
    );
    expect(rows[0].n).toBe(0);
  });
});
