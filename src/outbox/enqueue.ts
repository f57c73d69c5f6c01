/**
 * `enqueue` and `migrateOutbox`: one entry point for both dialects, chosen from the handle the caller passes
 * (a better-sqlite3 `Database`, or anything with a PostgreSQL `query(text, values)`).
 * @module
 */
import { type Clock, systemClock } from '../core/clock.js';
import { InvalidOptionsError } from '../core/errors.js';
import { booleanOption, knownFields } from '../core/option-checks.js';
import {
  isPgQueryable,
  isSqliteDatabase,
  type PgQueryable,
  type SqliteDatabaseLike,
} from './clients.js';
import {
  type EnqueueMessage,
  type EnqueueResult,
  type PreparedMessage,
  prepareMessage,
} from './message.js';
import { postgresOutboxNames, sqliteOutboxNames } from './names.js';
import { checkPayloadSize, maxPayloadBytesOption } from './payload-size.js';
import {
  enqueuePostgres,
  type MigrateOutboxResult,
  migratePostgresOutbox,
} from './postgres-outbox.js';
import { enqueueSqlite, migrateSqliteOutbox } from './sqlite-outbox.js';

/** Where the outbox table is. The same options must be given to `enqueue`, `migrateOutbox` and the source. */
export interface OutboxTableOptions {
  /** PostgreSQL schema of the table (ignored by SQLite). @default 'public' */
  schema?: string;
  /** Name of the outbox table. @default 'idempotency_outbox' */
  table?: string;
  /** Source of time for SQLite's timestamps (PostgreSQL uses its own `now()`). @default systemClock */
  clock?: Clock;
  /**
   * PostgreSQL: check that `enqueue` runs inside a transaction block, at the cost of one extra statement
   * (`SET LOCAL`). Turn it off only where the handle is known to be inside one (the store's transactional
   * `tx`). SQLite always checks (`db.inTransaction`, free). @default true
   */
  verifyTransaction?: boolean;
}

/** Options of {@link enqueue}: where the table is, and the largest payload it takes. */
export interface EnqueueOptions extends OutboxTableOptions {
  /**
   * The largest payload, in bytes, `enqueue` stores; a larger one is refused (`InvalidOptionsError`
   * naming both sizes) inside your transaction. Set it to what your broker takes (NATS: its
   * `max_payload`, 1 MiB by default; RabbitMQ 4: its `max_message_size`, 16 MiB by default), so that a
   * message it would refuse on every retry is never committed. On PostgreSQL nothing over 268,435,443
   * bytes is stored, whatever this says: the relay could not read it back.
   * @default 134217728 (128 MiB, the default `max_message_size` of RabbitMQ 3.8 to 3.13)
   */
  maxPayloadBytes?: number;
}

// Every key of OutboxTableOptions (and, for enqueue, EnqueueOptions), checked by the compiler both ways: a
// misspelt `tabel` would write the default table while the relay reads another, and the message would
// never be published.
const TABLE_FIELDS = Object.keys({
  schema: true,
  table: true,
  clock: true,
  verifyTransaction: true,
} as const satisfies Record<keyof OutboxTableOptions, true>);
const ENQUEUE_FIELDS = Object.keys({
  schema: true,
  table: true,
  clock: true,
  verifyTransaction: true,
  maxPayloadBytes: true,
} as const satisfies Record<keyof EnqueueOptions, true>);

// The options of one enqueue or migration, checked; the empty default skips the check (the common call).
const NO_OPTIONS: EnqueueOptions = Object.freeze({});
function checkedTableOptions<T extends OutboxTableOptions>(
  options: T,
  who: string,
  fields: readonly string[] = TABLE_FIELDS,
): T {
  if (options === NO_OPTIONS) return options;
  if (typeof options !== 'object' || options === null) {
    throw new InvalidOptionsError(`${who}: expected an object of options`);
  }
  knownFields(options, who, fields);
  return options;
}

// The message, validated and encoded, its payload no larger than the limit (see EnqueueOptions).
function preparedWithin(
  message: EnqueueMessage,
  options: EnqueueOptions,
  postgres: boolean,
): PreparedMessage {
  const limit = maxPayloadBytesOption(options.maxPayloadBytes);
  const prepared = prepareMessage(message);
  checkPayloadSize(prepared.payload.byteLength, limit, postgres);
  return prepared;
}

/**
 * Add a message to the outbox **inside the caller's open transaction**, so it commits, or rolls back,
 * together with the business writes. A relay publishes it after the commit, with `messageId` as the stable id.
 *
 * - PostgreSQL: pass anything with `query(text, values)` that is inside the transaction (a `PoolClient` after
 *   `BEGIN`, or the PostgreSQL store's transactional `tx`). Returns a promise. Refused (`InvalidOptionsError`,
 *   nothing inserted) when the statement would run in autocommit (see `verifyTransaction`), and on
 *   node-postgres's native client (`pg.native`), which would store the payload cut short or altered.
 * - SQLite: pass the better-sqlite3 `Database` from inside `db.transaction(fn)`. Synchronous (better-sqlite3
 *   transactions cannot await). Refused when no transaction is open.
 *
 * @throws InvalidOptionsError on a bad message, a payload over `maxPayloadBytes`, outside a transaction, on
 * node-postgres's native client, or for a `messageId` already used by a different message.
 * @throws StoreUnavailableError when the database fails (the caller's transaction should roll back).
 * @throws the driver's own error, as it is, for a PostgreSQL serialization failure or deadlock (SQLSTATE
 * `40001`, `40P01`; repeatable read or serializable): roll back and run the transaction again, as the
 * transactional mode does.
 * @example
 * // PostgreSQL
 * await client.query('BEGIN');
 * await client.query('INSERT INTO payments (id, amount) VALUES ($1, $2)', [id, amount]);
 * const { messageId } = await enqueue(client, { topic: 'payment.initiated', key: id, payload: { id, amount } });
 * await client.query('COMMIT');
 *
 * // SQLite
 * db.transaction(() => {
 *   db.prepare('INSERT INTO payments (id, amount) VALUES (?, ?)').run(id, amount);
 *   enqueue(db, { topic: 'payment.initiated', key: id, payload: { id, amount } });
 * })();
 */
export function enqueue(
  tx: SqliteDatabaseLike,
  message: EnqueueMessage,
  options?: EnqueueOptions,
): EnqueueResult;
export function enqueue(
  tx: PgQueryable,
  message: EnqueueMessage,
  options?: EnqueueOptions,
): Promise<EnqueueResult>;
export function enqueue(
  tx: SqliteDatabaseLike | PgQueryable,
  message: EnqueueMessage,
  given: EnqueueOptions = NO_OPTIONS,
): EnqueueResult | Promise<EnqueueResult> {
  if (isSqliteDatabase(tx)) {
    const options = checkedTableOptions(given, 'enqueue', ENQUEUE_FIELDS);
    const names = sqliteOutboxNames(options.table);
    const prepared = preparedWithin(message, options, false);
    return enqueueSqlite(tx, prepared, names, options.clock ?? systemClock);
  }
  if (isPgQueryable(tx)) {
    // Validation errors reject the promise rather than throwing synchronously, like every async API.
    return (async () => {
      const options = checkedTableOptions(given, 'enqueue', ENQUEUE_FIELDS);
      const names = postgresOutboxNames(options.schema, options.table);
      // Checked, not coerced: `verifyTransaction: 0` (falsy) would skip the check that keeps a message from
      // committing apart from the business writes.
      const verify = booleanOption(options.verifyTransaction, 'enqueue: verifyTransaction', true);
      return enqueuePostgres(tx, preparedWithin(message, options, true), names, verify);
    })();
  }
  throw new InvalidOptionsError(
    'enqueue: expected a better-sqlite3 Database or a PostgreSQL client with query(text, values)',
  );
}

/**
 * Create or update the outbox table: the numbered migrations it has not seen yet, each recorded in
 * `<table>_migrations`. Safe on every start and from several processes at once.
 *
 * - PostgreSQL: pass a `Pool` (a connection is checked out) or a client not inside a transaction; runs in
 *   one transaction under an advisory lock. Returns a promise.
 * - SQLite: pass a `Database`; runs in one `BEGIN IMMEDIATE` transaction. Synchronous.
 *
 * A table that a newer release migrated further (older code starting up beside newer code during a rolling
 * deploy, or after a rollback) is left as it is and reported in `schemaVersion` and `warning`, not refused:
 * this release runs on it as long as the newer migrations keep older code working. Log the warning; the
 * sources and relays do not migrate, so nothing else reports it.
 *
 * @throws StoreUnavailableError when the database fails (nothing is applied then).
 * @throws InvalidOptionsError for a bad schema or table name.
 * @example
 * const { warning } = await migrateOutbox(pool, { schema: 'billing' });
 * if (warning !== undefined) logger.warn(warning);
 * migrateOutbox(new Database('app.db'));
 */
export function migrateOutbox(
  db: SqliteDatabaseLike,
  options?: OutboxTableOptions,
): MigrateOutboxResult;
export function migrateOutbox(
  db: PgQueryable,
  options?: OutboxTableOptions,
): Promise<MigrateOutboxResult>;
export function migrateOutbox(
  db: SqliteDatabaseLike | PgQueryable,
  given: OutboxTableOptions = NO_OPTIONS,
): MigrateOutboxResult | Promise<MigrateOutboxResult> {
  if (isSqliteDatabase(db)) {
    const options = checkedTableOptions(given, 'migrateOutbox');
    return migrateSqliteOutbox(db, sqliteOutboxNames(options.table), options.clock ?? systemClock);
  }
  if (isPgQueryable(db)) {
    return (async () => {
      const options = checkedTableOptions(given, 'migrateOutbox');
      return migratePostgresOutbox(db, postgresOutboxNames(options.schema, options.table));
    })();
  }
  throw new InvalidOptionsError(
    'migrateOutbox: expected a better-sqlite3 Database or a PostgreSQL pool or client',
  );
}
