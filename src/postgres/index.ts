/**
 * `idempotency-kit/postgres`: the PostgreSQL store, its migrations, and the transactional mode in which the
 * record commits in the same transaction as the handler's writes. Takes a node-postgres `Pool` you created
 * (`pg` is an optional peer, never imported at run time here).
 * @module
 */
export type { PgPool, PgPoolClient, PgQueryable, PgQueryResult } from './client.js';
export { DEFAULT_SCHEMA, DEFAULT_TABLE } from './identifiers.js';
export type { MigrateOptions, MigrateResult } from './migrate.js';
export { migrate } from './migrate.js';
export type { PostgresStore, PostgresStoreOptions } from './postgres-store.js';
export { postgresStore } from './postgres-store.js';
export type {
  PostgresTransactional,
  PostgresTransactionalOptions,
  TransactionalRequest,
  TransactionContext,
} from './transactional.js';
export { IsolationLevel, postgresTransactional } from './transactional.js';
