import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createInProcessBus,
  createRelay,
  decodePayload,
  enqueue,
  postgresOutboxSource,
} from '../../../src/outbox/index.js';
import { migrate, postgresTransactional } from '../../../src/postgres/index.js';
import { type OutboxDatabase, openOutboxDatabase } from '../../helpers/outbox-postgres.js';

let db: OutboxDatabase;

beforeAll(async () => {
  db = await openOutboxDatabase(8);
  await migrate(db.pool, { schema: db.schema });
  await db.pool.query(
    `CREATE TABLE "${db.schema}".payments (id text PRIMARY KEY, amount int NOT NULL)`,
  );
});

afterAll(async () => {
  await db?.close();
});

describe('enqueue with the PostgreSQL transactional mode', () => {
  it('commits the record, the business row and the outbox row together: three concurrent duplicates give one payment and one message', async () => {
    const transactional = postgresTransactional({ pool: db.pool, schema: db.schema });
    const key = `pay-${Date.now()}`;
    const request = { key, payload: { amount: 500 } };
    const handler = async (
      tx: Parameters<Parameters<typeof transactional.runInTransaction>[1]>[0],
    ) => {
      await tx.query(`INSERT INTO "${db.schema}".payments (id, amount) VALUES ($1, $2)`, [
        key,
        500,
      ]);
      const { messageId } = await enqueue(
        tx,
        {
          topic: 'payment.initiated',
          key,
          payload: { id: key, amount: 500 },
          messageId: tx.downstreamKey('payment.initiated'),
        },
        { schema: db.schema },
      );
      return { messageId };
    };

    const outcomes = await Promise.all(
      [1, 2, 3].map(() => transactional.runInTransaction(request, handler)),
    );

    expect(outcomes.filter((o) => o.status === 'executed')).toHaveLength(1);
    expect(outcomes.filter((o) => o.status === 'replayed')).toHaveLength(2);
    const ids = new Set(
      outcomes.map((o) =>
        o.status === 'executed' || o.status === 'replayed' ? o.value.messageId : '',
      ),
    );
    expect(ids.size).toBe(1);

    const bus = createInProcessBus();
    const got: unknown[] = [];
    bus.subscribe('payment.initiated', (m) => {
      got.push([m.id, decodePayload(m)]);
    });
    await createRelay({
      source: postgresOutboxSource({ pool: db.pool, schema: db.schema, listen: false }),
      publisher: bus,
    }).drain();
    expect(got).toEqual([[[...ids][0], { id: key, amount: 500 }]]);
  });

  it('rolls the outbox row back with everything else when the handler fails', async () => {
    const transactional = postgresTransactional({ pool: db.pool, schema: db.schema });
    const key = `fail-${Date.now()}`;
    const before = (await db.rows()).length;

    await expect(
      transactional.runInTransaction({ key, payload: {} }, async (tx) => {
        await enqueue(tx, { topic: 'payment.initiated', payload: { key } }, { schema: db.schema });
        throw new Error('card declined');
      }),
    ).rejects.toThrow('card declined');

    expect((await db.rows()).length).toBe(before);
    const { rowCount } = await db.pool.query(
      `SELECT 1 FROM "${db.schema}".payments WHERE id = $1`,
      [key],
    );
    expect(rowCount).toBe(0);
  });
});
