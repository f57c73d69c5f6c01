/**
 * `migrateOutbox()` of an older release on an outbox table that a newer release already migrated further (a
 * rolling deploy, a rollback): nothing applied, nothing refused, and the result says the table is ahead in
 * `schemaVersion` and `warning`, as the records table's `migrate()` does. It used to answer `{ applied: [],
 * version }`, `version` claiming this release's newest migration, like an up-to-date table.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createRelay,
  enqueue,
  migrateOutbox,
  postgresOutboxSource,
  type Relay,
  sqliteOutboxSource,
} from '../../../src/outbox/index.js';
import { migrations } from '../../../src/outbox/migrations.gen.js';
import { env, requireService } from '../../helpers/env.js';
import { recordingPublisher, waitFor } from '../../helpers/outbox-recorder.js';
import { testPool, uniqueSchema } from '../../helpers/postgres-env.js';

const latest = (dialect: 'postgres' | 'sqlite') =>
  Math.max(...migrations.filter((m) => m.name.endsWith(`.${dialect}`)).map((m) => m.id));

// The warning the records table's migrate() gives, for the outbox table `table` at `latest + 2`.
const aheadWarning = (table: string, version: number) =>
  `${table} is at version ${version + 2}, newer than this release knows (${version}): a newer release ` +
  `applied future_one, future_two. Nothing was applied or undone; this release runs on it as long as ` +
  'those migrations keep older code working (see their release notes)';

const relays: Relay[] = [];

/** Enqueue one message and wait for a relay over `source` to publish it: the older code still runs. */
async function publishesOn(
  source: Parameters<typeof createRelay>[0]['source'],
  enqueueOne: () => Promise<unknown>,
): Promise<void> {
  const publisher = recordingPublisher();
  const relay = createRelay({ source, publisher, pollIntervalMs: 50, purgeIntervalMs: 0 });
  relays.push(relay);
  relay.start();
  await enqueueOne();
  await waitFor('the message published', () => publisher.messages.length === 1);
}

describe('migrateOutbox (PostgreSQL) on a table a newer release migrated', () => {
  const pool = testPool();
  const schemas: string[] = [];
  const version = latest('postgres');

  beforeAll(async () => {
    await requireService('PostgreSQL', env.databaseUrl);
  });

  afterAll(async () => {
    await Promise.all(relays.splice(0).map((relay) => relay.stop()));
    for (const schema of schemas) await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await pool.end();
  });

  async function migratedSchema(label: string): Promise<string> {
    const schema = uniqueSchema(label);
    schemas.push(schema);
    await migrateOutbox(pool, { schema });
    return schema;
  }

  it('applies nothing, reports the newest recorded migration and names the newer ones', async () => {
    // Arrange: a newer release's two migrations, recorded newest first (the rows are read in no order).
    const schema = await migratedSchema('oxahead');
    await pool.query(
      `INSERT INTO "${schema}".idempotency_outbox_migrations (id, name) VALUES ($1, $2), ($3, $4)`,
      [version + 2, 'future_two', version + 1, 'future_one'],
    );
    const read = `SELECT id, name FROM "${schema}".idempotency_outbox_migrations ORDER BY id`;
    const before = (await pool.query(read)).rows;
    // Act
    const result = await migrateOutbox(pool, { schema });
    // Assert
    expect(result).toEqual({
      applied: [],
      version,
      schemaVersion: version + 2,
      warning: aheadWarning(`${schema}.idempotency_outbox`, version),
    });
    expect((await pool.query(read)).rows).toEqual(before);
    await publishesOn(postgresOutboxSource({ pool, schema, listen: false }), async () => {
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        await enqueue(client, { topic: 'ahead', payload: { n: 1 } }, { schema });
        await client.query('COMMIT');
      } finally {
        client.release();
      }
    });
  });

  it('reports nothing more on a table at this release’s version', async () => {
    const schema = await migratedSchema('oxcurrent');
    expect(await migrateOutbox(pool, { schema })).toEqual({ applied: [], version });
  });
});

describe('migrateOutbox (SQLite) on a table a newer release migrated', () => {
  const version = latest('sqlite');
  let dir: string;
  const opened: Database.Database[] = [];

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), `outbox-schema-ahead-${process.pid}-`));
  });

  afterAll(async () => {
    await Promise.all(relays.splice(0).map((relay) => relay.stop()));
    for (const db of opened) db.close();
    rmSync(dir, { recursive: true, force: true });
  });

  function migratedFile(name: string, table?: string): Database.Database {
    const db = new Database(join(dir, `${name}.db`), { timeout: 5000 });
    opened.push(db);
    migrateOutbox(db, table === undefined ? {} : { table });
    return db;
  }

  it('applies nothing, reports the newest recorded migration and names the newer ones', async () => {
    // Arrange
    const db = migratedFile('ahead', 'orders_outbox');
    const insert = db.prepare(
      'INSERT INTO orders_outbox_migrations (id, name, applied_at) VALUES (?, ?, 0)',
    );
    insert.run(version + 2, 'future_two');
    insert.run(version + 1, 'future_one');
    const read = 'SELECT id, name FROM orders_outbox_migrations ORDER BY id';
    const before = db.prepare(read).all();
    // Act
    const result = migrateOutbox(db, { table: 'orders_outbox' });
    // Assert
    expect(result).toEqual({
      applied: [],
      version,
      schemaVersion: version + 2,
      warning: aheadWarning('orders_outbox', version),
    });
    expect(db.prepare(read).all()).toEqual(before);
    await publishesOn(sqliteOutboxSource({ database: db, table: 'orders_outbox' }), async () => {
      db.transaction(() => {
        enqueue(db, { topic: 'ahead', payload: { n: 1 } }, { table: 'orders_outbox' });
      })();
    });
  });

  it('reads ids stored as bigints (safe integers on) as numbers', () => {
    const db = migratedFile('bigints');
    db.prepare(
      'INSERT INTO idempotency_outbox_migrations (id, name, applied_at) VALUES (?, ?, 0)',
    ).run(version + 1, 'future_one');
    db.defaultSafeIntegers(true);
    expect(migrateOutbox(db)).toMatchObject({ applied: [], version, schemaVersion: version + 1 });
  });

  it('reports nothing more on a table at this release’s version', () => {
    const db = migratedFile('current');
    expect(migrateOutbox(db)).toEqual({ applied: [], version });
  });
});
