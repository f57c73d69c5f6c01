/**
 * Two SQLite outbox tables in one file (two applications, or two bounded contexts, on one database): an
 * enqueue wakes the relays of its own table only. The in-process wake was keyed by the `Database` alone,
 * so every enqueue into one table also woke the relays of the other, each for a claim that finds nothing.
 */
import { setImmediate as afterImmediate } from 'node:timers/promises';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { enqueue, migrateOutbox, sqliteOutboxSource } from '../../../src/outbox/index.js';

const db = new Database(':memory:');
migrateOutbox(db, { table: 'orders_outbox' });
migrateOutbox(db, { table: 'billing_outbox' });

afterAll(() => db.close());

describe('SQLite outbox wake-ups with two tables in one database', () => {
  it('wakes the relay of the table enqueued into, never the other table’s', async () => {
    const woken = { orders_outbox: 0, billing_outbox: 0 };
    const unsubscribes = await Promise.all(
      (['orders_outbox', 'billing_outbox'] as const).map((table) =>
        sqliteOutboxSource({ database: db, table }).subscribe?.(
          () => {
            woken[table]++;
          },
          (error) => {
            throw error;
          },
        ),
      ),
    );
    db.transaction(() => {
      enqueue(db, { topic: 'order.placed', payload: { id: 1 } }, { table: 'orders_outbox' });
    })();
    // The wake is deferred to after the enqueuing transaction: one turn later.
    await afterImmediate();
    await afterImmediate();
    expect(woken).toEqual({ orders_outbox: 1, billing_outbox: 0 });
    for (const unsubscribe of unsubscribes) await unsubscribe?.();
  });

  it('wakes a relay that spells its table in another case, as SQLite reads it as the same table', async () => {
    let woken = 0;
    const unsubscribe = await sqliteOutboxSource({
      database: db,
      table: 'Orders_Outbox',
    }).subscribe?.(
      () => {
        woken++;
      },
      (error) => {
        throw error;
      },
    );
    db.transaction(() => {
      enqueue(db, { topic: 'order.placed', payload: { id: 2 } }, { table: 'orders_outbox' });
    })();
    await afterImmediate();
    await afterImmediate();
    expect(woken).toBe(1);
    await unsubscribe?.();
  });
});
