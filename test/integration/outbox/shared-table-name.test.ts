/**
 * A records table and an outbox given the same table name (two applications on one database, each
 * configured on its own) would share one migrations table, `<table>_migrations`. The second migrator read
 * the first's migrations as its own: `migrateOutbox` answered "up to date" on the records table, and the
 * failure came later, from `enqueue` in production. Both migrators now refuse a migrations table that
 * another kind of table wrote, naming the clash, and change nothing.
 */
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isInvalidOptionsError } from '../../../src/index.js';
import { migrateOutbox } from '../../../src/outbox/index.js';
import { migrate } from '../../../src/postgres/index.js';
import { migrate as migrateSqlite } from '../../../src/sqlite/index.js';
import { env, requireService } from '../../helpers/env.js';
import { testPool, uniqueSchema } from '../../helpers/postgres-env.js';

const pool = testPool({ max: 2 });
const schema = uniqueSchema('sharedname');

beforeAll(async () => {
  await requireService('PostgreSQL', env.databaseUrl);
});

afterAll(async () => {
  await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await pool.end();
});

/** The error `promise` rejects with, or a failure naming what it resolved to. */
async function rejection(promise: Promise<unknown>): Promise<unknown> {
  const settled = await promise.then(
    (value) => ({ value }),
    (error: unknown) => ({ error }),
  );
  if ('error' in settled) return settled.error;
  throw new Error(`expected a rejection, got ${JSON.stringify(settled.value)}`);
}

function thrown(fn: () => unknown): unknown {
  try {
    return { returned: fn() };
  } catch (error) {
    return error;
  }
}

describe('a records table and an outbox with the same name (PostgreSQL)', () => {
  it('migrateOutbox refuses the name of a records table instead of reporting it up to date', async () => {
    await migrate(pool, { schema, table: 'taken_by_records' });
    const error = await rejection(migrateOutbox(pool, { schema, table: 'taken_by_records' }));
    expect(isInvalidOptionsError(error)).toBe(true);
    expect((error as Error).message).toMatch(/taken_by_records_migrations.*0001_records/);
  });

  it('migrate refuses the name of an outbox table, with the same clear error', async () => {
    await migrateOutbox(pool, { schema, table: 'taken_by_outbox' });
    const error = await rejection(migrate(pool, { schema, table: 'taken_by_outbox' }));
    expect(isInvalidOptionsError(error)).toBe(true);
    expect((error as Error).message).toMatch(/taken_by_outbox_migrations.*0001_outbox\.postgres/);
  });
});

describe('a records table and an outbox with the same name (SQLite)', () => {
  it('migrateOutbox refuses the name of a records table', () => {
    const db = new Database(':memory:');
    migrateSqlite(db, { table: 'shared' });
    const error = thrown(() => migrateOutbox(db, { table: 'shared' }));
    expect(isInvalidOptionsError(error)).toBe(true);
    expect((error as Error).message).toMatch(/shared_migrations.*0001_records/);
    db.close();
  });

  it('migrate refuses the name of an outbox table', () => {
    const db = new Database(':memory:');
    migrateOutbox(db, { table: 'shared' });
    const error = thrown(() => migrateSqlite(db, { table: 'shared' }));
    expect(isInvalidOptionsError(error)).toBe(true);
    expect((error as Error).message).toMatch(/shared_migrations.*0001_outbox\.sqlite/);
    db.close();
  });
});
