/**
 * PostgreSQL side of `enqueue` and `migrateOutbox`: the insert that runs in the caller's transaction, and the
 * numbered migrations applied under a transaction-level advisory lock.
 * @module
 */
import { POSTGRES_OUTBOX_OBJECTS } from '../core/derived-names.js';
import { InvalidOptionsError } from '../core/errors.js';
import { checkMigrationsOwner, type MigrationRow } from '../core/migrations-owner.js';
import { schemaAhead } from '../core/schema-ahead.js';
import { checkOutGuarded } from '../postgres/check-out.js';
import { isRetryableTransactionError } from '../postgres/client.js';
import { type NativeClientRefusal, refuseNativeClient } from '../postgres/native-client.js';
import { BEGIN_READ_COMMITTED } from '../postgres/own-transaction.js';
import { createSchemaIfMissing } from '../postgres/schema.js';
import { postgresNamesCheck } from '../postgres/taken-names.js';
import { isPgPool, type PgPoolClient, type PgQueryable } from './clients.js';
import { outboxStoreError } from './errors.js';
import type { EnqueueResult, PreparedMessage } from './message.js';
import { migrations } from './migrations.gen.js';
import { type OutboxNames, renderOutboxSql } from './names.js';
import * as sql from './sql.gen.js';

/** What {@link migratePostgresOutbox} and `migrateOutbox` report (both dialects). */
export interface MigrateOutboxResult {
  /** Names of the migrations applied by this call, in order (empty when already up to date). */
  applied: string[];
  /** Id of the newest migration this release knows, now in place. */
  version: number;
  /**
   * Only when a newer release migrated the table further than this one knows: the id of the newest migration
   * recorded on it, greater than `version`. Absent otherwise, so the result of an up-to-date table is
   * unchanged.
   */
  schemaVersion?: number;
  /**
   * With `schemaVersion`: says the table is ahead of this release and names the newer migrations, for the
   * log. Nothing was applied or undone.
   */
  warning?: string;
}

const SET_IN_TRANSACTION = "SET LOCAL idempotency_kit.outbox_in_transaction = 'on'";

const postgresMigrations = migrations.filter((m) => m.name.endsWith('.postgres'));

// The payload goes as a bare Buffer, which node-postgres's native client cuts at its first zero byte and
// PostgreSQL then reads as bytea's escape format: the relay would publish other bytes, or none.
const NATIVE_ENQUEUE_REFUSAL: NativeClientRefusal = {
  subject: '`tx` is (or is a pool of)',
  harm:
    "the message's payload would be stored cut short or altered (a backslash taken as an escape), and " +
    'published so',
  instead:
    'Run the transaction on a connection of the JavaScript client (`new pg.Pool()` from `pg`, without ' +
    'NODE_PG_FORCE_NATIVE); nothing was inserted',
};

/** Insert `message` on `tx`, which must be inside the caller's open transaction. */
export async function enqueuePostgres(
  tx: PgQueryable,
  message: PreparedMessage,
  names: OutboxNames,
  verifyTransaction: boolean,
): Promise<EnqueueResult> {
  // A property read on the connection, before any statement: nothing reaches the caller's transaction.
  refuseNativeClient(tx, 'enqueue', NATIVE_ENQUEUE_REFUSAL);
  let result: { in_transaction: boolean; id: string | null } | undefined;
  try {
    // Ignored (with a warning) outside a transaction block: the insert's guard then refuses. One extra
    // round trip, no subtransaction (a SAVEPOINT would cost two and a subtransaction id).
    if (verifyTransaction) await tx.query(SET_IN_TRANSACTION);
    const { rows } = await tx.query(renderOutboxSql(sql.postgresEnqueue, names), [
      message.messageId,
      message.topic,
      message.key,
      message.payload,
      message.contentType,
      message.headers,
      !verifyTransaction,
    ]);
    result = rows[0] as typeof result;
  } catch (error) {
    throw enqueueError(error);
  }
  if (result === undefined || result.in_transaction !== true) {
    throw new InvalidOptionsError(
      'enqueue must run inside the caller’s open transaction (BEGIN first, or use the store’s ' +
        'transactional mode): in autocommit the message would commit apart from the business writes',
    );
  }
  if (result.id !== null)
    return { messageId: message.messageId, rowId: result.id, duplicate: false };
  return duplicateOf(tx, message, names);
}

// A serialization failure or a deadlock (40001, 40P01: a repeatable read or serializable transaction, where
// ON CONFLICT refuses a message id committed after the snapshot) tells the caller to run its transaction
// again, so it goes through as the driver raised it: the transactional mode, and a retry loop testing the
// SQLSTATE, see it as from any other statement of the transaction. Wrapped as StoreUnavailableError (the
// SQLSTATE only in `cause`), the transactional mode answered the request as an outage instead.
function enqueueError(error: unknown): unknown {
  return isRetryableTransactionError(error) ? error : outboxStoreError('enqueue', error);
}

// The message id already exists: a retry of the same enqueue is fine, another message under the same id
// is a bug that must be loud (its events would be deduplicated away downstream).
async function duplicateOf(
  tx: PgQueryable,
  message: PreparedMessage,
  names: OutboxNames,
): Promise<EnqueueResult> {
  let existing:
    | {
        id: string;
        topic: string;
        message_key: string | null;
        payload: Buffer;
        content_type: string;
      }
    | undefined;
  try {
    const { rows } = await tx.query(renderOutboxSql(sql.postgresSelectMessage, names), [
      message.messageId,
    ]);
    existing = rows[0] as typeof existing;
  } catch (error) {
    throw enqueueError(error);
  }
  if (existing === undefined) {
    // Conflicted with a row that was purged or rolled back meanwhile: the caller may retry.
    throw outboxStoreError('enqueue', new Error(`message id ${message.messageId} conflicted`));
  }
  assertSameMessage(message, existing);
  return { messageId: message.messageId, rowId: String(existing.id), duplicate: true };
}

/** Throw unless a stored row carries the same topic, key and payload as `message`. */
export function assertSameMessage(
  message: PreparedMessage,
  existing: {
    topic: string;
    message_key: string | null;
    payload: Uint8Array;
    content_type: string;
  },
): void {
  const same =
    existing.topic === message.topic &&
    existing.message_key === message.key &&
    existing.content_type === message.contentType &&
    Buffer.compare(Buffer.from(existing.payload), message.payload) === 0;
  if (!same) {
    throw new InvalidOptionsError(
      `enqueue: message id ${JSON.stringify(message.messageId)} was already enqueued with a different ` +
        'topic, key or payload',
    );
  }
}

/**
 * Bring a PostgreSQL outbox table up to date, in one transaction under an advisory lock keyed by schema and
 * table: concurrent migrators wait, then find everything applied. A table that a newer release migrated
 * further is left as it is and reported in `schemaVersion` and `warning`, not refused (a rolling deploy).
 */
export async function migratePostgresOutbox(
  db: PgQueryable,
  names: OutboxNames,
): Promise<MigrateOutboxResult> {
  let failure: unknown;
  let checkedOut: PgPoolClient | undefined;
  // A connection whose backend dies between statements must not crash the process: the failure is kept,
  // the connection discarded, and the next statement reports it.
  let unguard = () => {};
  try {
    if (isPgPool(db)) {
      ({ client: checkedOut, unguard } = await checkOutGuarded(db, (error) => {
        failure = error;
      }));
    }
  } catch (error) {
    throw outboxStoreError('migrate', error);
  }
  const client: PgQueryable = checkedOut ?? db;
  try {
    // Read committed: each statement after the lock must see what the migrator that held it committed
    // (see BEGIN_READ_COMMITTED).
    await client.query(BEGIN_READ_COMMITTED);
    // Released at COMMIT/ROLLBACK, so it also works behind a transaction-mode pooler.
    await client.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [
      `idempotency-kit:migrate-outbox:${names.schemaName}.${names.tableName}`,
    ]);
    // Shared with the records table's migrate(): the schema may be created by either, at the same time.
    await createSchemaIfMissing(client, names.schema);
    // Names taken by a records table's or another outbox's objects: refused before anything is created.
    const checkNames = await postgresNamesCheck(
      client,
      'migrateOutbox',
      names.schemaName,
      names.tableName,
      POSTGRES_OUTBOX_OBJECTS,
    );
    checkNames(false);
    await client.query(renderOutboxSql(sql.postgresCreateMigrationsTable, names));
    const { rows } = await client.query(`SELECT id, name FROM ${names.migrationsTable}`);
    checkMigrationsOwner(
      rows as MigrationRow[],
      postgresMigrations[0]!.name,
      'migrateOutbox',
      `${names.schemaName}.${names.tableName}_migrations`,
    );
    const done = new Set((rows as Array<{ id: number }>).map((row) => row.id));
    checkNames(!done.has(1));
    const applied: string[] = [];
    for (const migration of postgresMigrations) {
      if (done.has(migration.id)) continue;
      await client.query(renderOutboxSql(migration.sql, names));
      await client.query(`INSERT INTO ${names.migrationsTable} (id, name) VALUES ($1, $2)`, [
        migration.id,
        migration.name,
      ]);
      applied.push(migration.name);
    }
    await client.query('COMMIT');
    const version = Math.max(0, ...postgresMigrations.map((m) => m.id));
    const table = `${names.schemaName}.${names.tableName}`;
    // A newer release's migrations are reported, not refused, as the records table's migrate() does.
    return { applied, version, ...schemaAhead(rows as MigrationRow[], version, table) };
  } catch (error) {
    failure = error;
    await client.query('ROLLBACK').catch(() => {});
    throw outboxStoreError('migrate', error);
  } finally {
    unguard();
    // A connection that failed mid-transaction is discarded rather than reused.
    checkedOut?.release(failure instanceof Error ? failure : undefined);
  }
}
