/**
 * `enqueue` in a repeatable read or serializable transaction that PostgreSQL refuses with 40001 (here: the
 * message id was committed by another transaction after this one's snapshot, which `ON CONFLICT DO
 * NOTHING` cannot judge at that level). 40001 means "run the transaction again": the transactional mode
 * does so, and so does an application's own retry loop, by the SQLSTATE. Before, enqueue wrapped it in a
 * `StoreUnavailableError` (code `store_unavailable`, the SQLSTATE only in `cause`): the transactional mode
 * answered the request as an outage, and a loop testing `error.code === '40001'` gave up.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isStoreUnavailableError } from '../../../src/core/errors.js';
import { enqueue } from '../../../src/outbox/index.js';
import { migrate, postgresTransactional } from '../../../src/postgres/index.js';
import { type OutboxDatabase, openOutboxDatabase } from '../../helpers/outbox-postgres.js';

let db: OutboxDatabase;

beforeAll(async () => {
  db = await openOutboxDatabase(8);
  await migrate(db.pool, { schema: db.schema });
});

afterAll(async () => {
  await db?.close();
});

const event = (messageId: string) => ({
  topic: 'payment.initiated',
  key: 'p-1',
  payload: { paymentId: 'p-1', amount: 500 },
  messageId,
});

describe.each(['repeatable read', 'serializable'] as const)('enqueue at %s', (level) => {
  it('lets a serialization failure through with its SQLSTATE, for the caller to run the transaction again', async () => {
    // Arrange: a transaction whose snapshot predates another's commit of the same message id.
    const messageId = `race-${level}-${Date.now()}`;
    const client = await db.pool.connect();
    let error: unknown;
    try {
      await client.query(`BEGIN ISOLATION LEVEL ${level.toUpperCase()}`);
      await client.query('SELECT 1');
      await db.transaction((tx) => enqueue(tx, event(messageId), { schema: db.schema }));

      // Act
      error = await enqueue(client, event(messageId), { schema: db.schema }).catch((e) => e);
    } finally {
      await client.query('ROLLBACK').catch(() => {});
      client.release();
    }

    // Assert: 40001, as every other statement of the transaction reports it, not an outage.
    expect(error).toMatchObject({ code: '40001' });
    expect(isStoreUnavailableError(error)).toBe(false);
  });

  it('is run again by the transactional mode, which then finds the message enqueued', async () => {
    // Arrange: on its first run only, the handler's snapshot predates another commit of its message id.
    const transactional = postgresTransactional({ pool: db.pool, schema: db.schema });
    const messageId = `tx-race-${level}-${Date.now()}`;
    let runs = 0;

    // Act
    const outcome = await transactional.runInTransaction(
      { key: messageId, payload: {}, isolationLevel: level },
      async (tx) => {
        runs++;
        if (runs === 1) {
          await db.transaction((other) => enqueue(other, event(messageId), { schema: db.schema }));
        }
        const result = await enqueue(tx, event(messageId), { schema: db.schema });
        return { duplicate: result.duplicate };
      },
    );

    // Assert: the second run committed; the message exists once.
    expect(outcome).toMatchObject({ status: 'executed', value: { duplicate: true } });
    expect(runs).toBe(2);
    const rows = await db.rows();
    expect(rows.filter((row) => row.message_id === messageId)).toHaveLength(1);
  });
});
