/**
 * SQLite side of `enqueue` and `migrateOutbox`: a synchronous insert in the caller's open better-sqlite3
 * transaction, and the numbered migrations applied in one `BEGIN IMMEDIATE` transaction.
 * @module
 */
import type { Clock } from '../core/clock.js';
import { SQLITE_OUTBOX_OBJECTS } from '../core/derived-names.js';
import { InvalidOptionsError } from '../core/errors.js';
import { checkMigrationsOwner, type MigrationRow } from '../core/migrations-owner.js';
import { schemaAhead } from '../core/schema-ahead.js';
import { sqliteNamesCheck } from '../sqlite/taken-names.js';
import type { SqliteDatabaseLike } from './clients.js';
import { outboxStoreError } from './errors.js';
import { signalLocalEnqueue } from './local-wake.js';
import type { EnqueueResult, PreparedMessage } from './message.js';
import { migrations } from './migrations.gen.js';
import { type OutboxNames, renderOutboxSql } from './names.js';
import type { MigrateOutboxResult } from './postgres-outbox.js';
import { assertSameMessage } from './postgres-outbox.js';
import * as sql from './sql.gen.js';
import { prepared } from './sqlite-prepared.js';

const sqliteMigrations = migrations.filter((m) => m.name.endsWith('.sqlite'));

/** Insert `message` on `db`, which must have the caller's transaction open. Synchronous. */
export function enqueueSqlite(
  db: SqliteDatabaseLike,
  message: PreparedMessage,
  names: OutboxNames,
  clock: Clock,
): EnqueueResult {
  if (!db.inTransaction) {
    throw new InvalidOptionsError(
      'enqueue must run inside the caller’s open transaction (db.transaction(fn)): outside one the ' +
        'message would commit apart from the business writes',
    );
  }
  try {
    const inserted = prepared(db, renderOutboxSql(sql.sqliteEnqueue, names)).get({
      message_id: message.messageId,
      topic: message.topic,
      message_key: message.key,
      payload: message.payload,
      content_type: message.contentType,
      headers: message.headers,
      now: clock.now(),
    }) as { id: string } | undefined;
    if (inserted !== undefined) {
      signalLocalEnqueue(db, names.tableName);
      return { messageId: message.messageId, rowId: inserted.id, duplicate: false };
    }
    const existing = prepared(db, renderOutboxSql(sql.sqliteSelectMessage, names)).get({
      message_id: message.messageId,
    }) as
      | {
          id: string;
          topic: string;
          message_key: string | null;
          payload: Uint8Array;
          content_type: string;
        }
      | undefined;
    if (existing === undefined) throw new Error(`message id ${message.messageId} conflicted`);
    assertSameMessage(message, existing);
    return { messageId: message.messageId, rowId: existing.id, duplicate: true };
  } catch (error) {
    throw outboxStoreError('enqueue', error);
  }
}

/**
 * Bring a SQLite outbox table up to date in one `BEGIN IMMEDIATE` transaction: a second process waits for
 * the write lock (within its busy timeout), then finds nothing left to do. Synchronous. A table that a newer
 * release migrated further is left as it is and reported in `schemaVersion` and `warning`, not refused.
 */
export function migrateSqliteOutbox(
  db: SqliteDatabaseLike,
  names: OutboxNames,
  clock: Clock,
): MigrateOutboxResult {
  const run = () => {
    // Names taken by a records table's or another outbox's objects: refused before anything is created.
    const checkNames = sqliteNamesCheck(
      db,
      'migrateOutbox',
      names.tableName,
      SQLITE_OUTBOX_OBJECTS,
    );
    checkNames(false);
    db.exec(renderOutboxSql(sql.sqliteCreateMigrationsTable, names));
    const rows = db.prepare(`SELECT id, name FROM ${names.migrationsTable}`).all() as Array<
      MigrationRow & { id: number }
    >;
    checkMigrationsOwner(
      rows,
      sqliteMigrations[0]!.name,
      'migrateOutbox',
      `${names.tableName}_migrations`,
    );
    const done = new Set(rows.map((row) => Number(row.id)));
    checkNames(!done.has(1));
    const insert = db.prepare(
      `INSERT INTO ${names.migrationsTable} (id, name, applied_at) VALUES (@id, @name, @applied_at)`,
    );
    const applied: string[] = [];
    for (const migration of sqliteMigrations) {
      if (done.has(migration.id)) continue;
      db.exec(renderOutboxSql(migration.sql, names));
      insert.run({ id: migration.id, name: migration.name, applied_at: clock.now() });
      applied.push(migration.name);
    }
    const version = Math.max(0, ...sqliteMigrations.map((m) => m.id));
    // A newer release's migrations are reported, not refused, as the records table's migrate() does.
    return { applied, version, ...schemaAhead(rows, version, names.tableName) };
  };
  try {
    return db.transaction(run).immediate();
  } catch (error) {
    throw outboxStoreError('migrate', error);
  }
}
