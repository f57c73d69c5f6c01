/**
 * `idempotency-kit/sqlite`: the SQLite store on better-sqlite3 12 (optional peer dependency), the
 * embedded, durable default, and its transactional mode (the record commits with your writes). Loads
 * without better-sqlite3; the driver is required only when the store opens a file itself.
 * @module
 */
export type {
  SqliteDatabase,
  SqliteRunResult,
  SqliteStatement,
  SqliteTransaction,
} from './client.js';
export type { MigrateOptions, MigrateResult } from './migrate.js';
export { migrate } from './migrate.js';
export type { SqliteStoreWarning } from './schema-warning.js';
export type { SqliteStore, SqliteStoreOptions } from './sqlite-store.js';
export { SqliteSynchronous, sqliteStore } from './sqlite-store.js';
export type {
  SqliteRunInTransactionOptions,
  SqliteTransactional,
  SqliteTransactionalOptions,
  SqliteTransactionalRequest,
  SqliteTransactionContext,
  SyncResult,
} from './transactional.js';
export { sqliteTransactional } from './transactional.js';
