/**
 * A records table or an outbox named after another one's objects, on one real PostgreSQL schema or one
 * SQLite file: `orders_migrations` is the records table `orders`'s migrations table, `orders_token_seq`
 * its token sequence, `orders_meta` (SQLite) its token counter, `orders_pending_idx` an outbox's index.
 * Migrating the second one failed with the database's own "already exists" (an outage to the caller,
 * naming neither table), or read the other's records table as its migrations table ("column id does not
 * exist"). Both migrators now refuse, before creating anything, with an InvalidOptionsError naming both
 * objects; the first table is left as it was.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isInvalidOptionsError } from '../../../src/index.js';
import { migrateOutbox } from '../../../src/outbox/index.js';
import { migrate } from '../../../src/postgres/index.js';
import { migrate as migrateSqlite } from '../../../src/sqlite/index.js';
import { bundledCli as cli } from '../../helpers/bundled-cli.js';
import { env, requireService } from '../../helpers/env.js';
import { testPool, uniqueSchema } from '../../helpers/postgres-env.js';

const pool = testPool({ max: 2 });
const schema = uniqueSchema('derivednames');
const dir = mkdtempSync(join(tmpdir(), 'derived-names-'));

beforeAll(async () => {
  await requireService('PostgreSQL', env.databaseUrl);
});

afterAll(async () => {
  await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await pool.end();
  rmSync(dir, { recursive: true, force: true });
});

type Kind = 'store' | 'outbox';

/** [first kind, first table, second kind, second table]: the second collides with the first. */
type Case = [Kind, string, Kind, string];

/** `name` as a word of the message: `s.a` must not match inside `s.a_migrations`. */
function named(name: string): RegExp {
  return new RegExp(`${name.replaceAll('.', '\\.')}(?![A-Za-z0-9_])`);
}

async function settle(attempt: () => unknown): Promise<unknown> {
  try {
    await attempt();
  } catch (error) {
    return error;
  }
  return undefined;
}

describe('table names that collide with derived objects (PostgreSQL)', () => {
  const migratePg = (kind: Kind, table: string) =>
    kind === 'store' ? migrate(pool, { schema, table }) : migrateOutbox(pool, { schema, table });
  const relations = async () =>
    (
      await pool.query(
        `SELECT c.relname::text || ':' || c.relkind::text AS r FROM pg_class c
         JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 ORDER BY 1`,
        [schema],
      )
    ).rows.map((row: { r: string }) => row.r);

  it.each<Case>([
    ['store', 'p1', 'store', 'p1_migrations'],
    ['store', 'p2_migrations', 'store', 'p2'],
    ['store', 'p3', 'store', 'p3_token_seq'],
    ['store', 'p4_token_seq', 'store', 'p4'],
    ['store', 'p5', 'store', 'p5_expires_at_idx'],
    ['store', 'p6_expires_at_idx', 'store', 'p6'],
    ['store', 'p7', 'outbox', 'p7_migrations'],
    ['outbox', 'p8_migrations', 'store', 'p8'],
    ['outbox', 'p9', 'store', 'p9_pending_idx'],
    ['store', 'p10_sent_idx', 'outbox', 'p10'],
    ['outbox', 'p11', 'outbox', 'p11_message_id_key'],
    ['outbox', 'p12_migrations', 'outbox', 'p12'],
  ])('%s %s, then %s %s: refused, naming both; nothing created', async (k1, t1, k2, t2) => {
    // Arrange
    await migratePg(k1, t1);
    const before = await relations();
    // Act
    const error = await settle(() => migratePg(k2, t2));
    // Assert
    expect(isInvalidOptionsError(error), String(error)).toBe(true);
    const message = (error as Error).message;
    expect(message).toMatch(/^migrate(Outbox)?: cannot create /);
    expect(message).toMatch(named(`${schema}.${t1}`));
    expect(message).toMatch(named(`${schema}.${t2}`));
    expect(await relations()).toEqual(before);
    // The first one is untouched: up to date
    expect((await migratePg(k1, t1)).applied).toEqual([]);
  });

  it('idempotency-kit migrate reports it as a usage error (exit 2), naming both', async () => {
    // Arrange
    await migrate(pool, { schema, table: 'p30' });
    // Act
    const run = await cli([
      'migrate',
      '--database-url',
      env.databaseUrl,
      '--schema',
      schema,
      '--table',
      'p30_token_seq',
    ]);
    // Assert
    expect(run.code).toBe(2);
    expect(run.stderr).toContain(
      `idempotency-kit migrate failed: migrate: cannot create the records table ${schema}.p30_token_seq: ` +
        `${schema}.p30_token_seq is already a sequence (the token sequence of the records table ${schema}.p30)`,
    );
  });

  it('still migrates tables whose names only look alike (p20 and p20_token, p20x_migrations)', async () => {
    // Act / Assert: no derived name of one is the other's
    for (const table of ['p20', 'p20_token', 'p20x_migrations_x']) {
      await migrate(pool, { schema, table });
    }
    await migrateOutbox(pool, { schema, table: 'p20_pending' });
    expect((await migrate(pool, { schema, table: 'p20' })).applied).toEqual([]);
  });
});

describe('table names that collide with derived objects (SQLite file)', () => {
  const migrateFile = (db: Database.Database, kind: Kind, table: string) =>
    kind === 'store' ? migrateSqlite(db, { table }) : migrateOutbox(db, { table });
  const objects = (db: Database.Database) =>
    (
      db.prepare("SELECT type || ':' || name AS o FROM sqlite_schema ORDER BY 1").all() as Array<{
        o: string;
      }>
    ).map((row) => row.o);

  it.each<Case>([
    ['store', 's1', 'store', 's1_meta'],
    ['store', 's2_meta', 'store', 's2'],
    ['store', 's3', 'store', 's3_migrations'],
    ['store', 's4_migrations', 'store', 's4'],
    ['store', 's5', 'store', 'S5_EXPIRES_AT'],
    ['store', 's6', 'outbox', 's6_expires_at'],
    ['outbox', 's7', 'store', 's7_pending_idx'],
    ['store', 's8_sent_idx', 'outbox', 's8'],
    ['outbox', 's9_migrations', 'store', 's9'],
  ])('%s %s, then %s %s: refused, naming both; nothing created', async (k1, t1, k2, t2) => {
    // Arrange: a file per case
    const db = new Database(join(dir, `${t1}.db`));
    try {
      migrateFile(db, k1, t1);
      const before = objects(db);
      // Act
      const error = await settle(() => migrateFile(db, k2, t2));
      // Assert
      expect(isInvalidOptionsError(error), String(error)).toBe(true);
      const message = (error as Error).message;
      expect(message).toMatch(/^migrate(Outbox)?: cannot create /);
      expect(message.toLowerCase()).toMatch(named(t1.toLowerCase()));
      expect(message.toLowerCase()).toMatch(named(t2.toLowerCase()));
      expect(objects(db)).toEqual(before);
      expect(migrateFile(db, k1, t1).applied).toEqual([]);
    } finally {
      db.close();
    }
  });
});
