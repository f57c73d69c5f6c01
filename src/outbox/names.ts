/**
 * Where the outbox lives: validated names, quoted for SQL, and the `{{placeholder}}` renderer for the SQL
 * files. Names come from configuration, never from request data, and are checked strictly (letters, digits,
 * underscores) rather than escaped, so nothing can be injected.
 * @module
 */
import { createHash } from 'node:crypto';
import { InvalidOptionsError } from '../core/errors.js';

/** Default schema of the PostgreSQL outbox table. */
export const DEFAULT_OUTBOX_SCHEMA = 'public';
/** Default name of the outbox table. */
export const DEFAULT_OUTBOX_TABLE = 'idempotency_outbox';

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/;
// Identifiers are truncated at 63 bytes by PostgreSQL; a table of at most 48 leaves room for the longest
// derived name (`<table>_message_id_key`).
const MAX_SCHEMA_LENGTH = 63;
const MAX_TABLE_LENGTH = 48;
const MAX_CHANNEL_LENGTH = 63;

/** Where the outbox table is and what it needs, as quoted SQL identifiers (and a channel name). */
export interface OutboxNames {
  /** Unquoted schema name (PostgreSQL; `main` for SQLite). */
  schemaName: string;
  /** Unquoted table name. */
  tableName: string;
  /** `"schema"` */
  schema: string;
  /** `"schema"."table"` (PostgreSQL) or `"table"` (SQLite). */
  table: string;
  /** The table migrations are recorded in: `<table>_migrations`. */
  migrationsTable: string;
  /** `"<table>_message_id_key"`: the unique constraint on message_id. */
  messageIdKey: string;
  /** `"<table>_pending_idx"`: the partial index of unsent rows. */
  pendingIndex: string;
  /** `"<table>_sent_idx"`: the partial index purge walks. */
  sentIndex: string;
  /** `"schema"."<table>_notify"`: the trigger function (PostgreSQL). */
  notifyFunction: string;
  /** `"<table>_notify"`: the statement trigger (PostgreSQL). */
  notifyTrigger: string;
  /** The LISTEN/NOTIFY channel, unquoted: `schema.table`, or a digest when that is too long. */
  channel: string;
  /** The channel as a SQL string literal. */
  channelLiteral: string;
  /** The channel as a quoted identifier, for `LISTEN`. */
  channelIdentifier: string;
}

function checkIdentifier(option: string, value: unknown, maxLength: number): string {
  if (typeof value !== 'string' || !IDENTIFIER.test(value) || value.length > maxLength) {
    throw new InvalidOptionsError(
      `outbox: ${option} must be 1-${maxLength} letters, digits or underscores, not starting with a digit; got ${JSON.stringify(value)}`,
    );
  }
  return value;
}

const quote = (name: string) => `"${name}"`;

/**
 * Validate the schema and table names of a PostgreSQL outbox and build every name its SQL needs.
 * @throws InvalidOptionsError when a name is not a plain identifier.
 */
export function postgresOutboxNames(
  schema: unknown = DEFAULT_OUTBOX_SCHEMA,
  table: unknown = DEFAULT_OUTBOX_TABLE,
): OutboxNames {
  const schemaName = checkIdentifier('schema', schema, MAX_SCHEMA_LENGTH);
  const tableName = checkIdentifier('table', table, MAX_TABLE_LENGTH);
  const qualified = (name: string) => `${quote(schemaName)}.${quote(name)}`;
  // pg_notify refuses channel names of 64 bytes or more; long names fall back to a stable digest.
  const readable = `${schemaName}.${tableName}`;
  const channel =
    readable.length <= MAX_CHANNEL_LENGTH
      ? readable
      : `outbox_${createHash('sha256').update(readable).digest('hex').slice(0, 32)}`;
  return {
    schemaName,
    tableName,
    schema: quote(schemaName),
    table: qualified(tableName),
    migrationsTable: qualified(`${tableName}_migrations`),
    messageIdKey: quote(`${tableName}_message_id_key`),
    pendingIndex: quote(`${tableName}_pending_idx`),
    sentIndex: quote(`${tableName}_sent_idx`),
    notifyFunction: qualified(`${tableName}_notify`),
    notifyTrigger: quote(`${tableName}_notify`),
    channel,
    // Only [A-Za-z0-9_.] can occur, so wrapping in quotes is enough.
    channelLiteral: `'${channel}'`,
    channelIdentifier: quote(channel),
  };
}

/**
 * Validate the table name of a SQLite outbox and build every name its SQL needs.
 * @throws InvalidOptionsError when the name is not a plain identifier.
 */
export function sqliteOutboxNames(table: unknown = DEFAULT_OUTBOX_TABLE): OutboxNames {
  const tableName = checkIdentifier('table', table, MAX_TABLE_LENGTH);
  return {
    schemaName: 'main',
    tableName,
    schema: quote('main'),
    table: quote(tableName),
    migrationsTable: quote(`${tableName}_migrations`),
    messageIdKey: quote(`${tableName}_message_id_key`),
    pendingIndex: quote(`${tableName}_pending_idx`),
    sentIndex: quote(`${tableName}_sent_idx`),
    notifyFunction: quote(`${tableName}_notify`),
    notifyTrigger: quote(`${tableName}_notify`),
    channel: tableName,
    channelLiteral: `'${tableName}'`,
    channelIdentifier: quote(tableName),
  };
}

const SKIP = new Set(['schemaName', 'tableName', 'channel']);

/**
 * Fill a SQL file's `{{placeholders}}` with quoted names.
 * @throws Error when the SQL names a placeholder that does not exist (a bug in a .sql file).
 */
export function renderOutboxSql(sql: string, names: OutboxNames): string {
  return sql.replace(/\{\{(\w+)\}\}/g, (_, name: string) => {
    const value = (names as unknown as Record<string, unknown>)[name];
    if (typeof value !== 'string' || SKIP.has(name)) {
      throw new Error(`unknown SQL placeholder {{${name}}}`);
    }
    return value;
  });
}
