/**
 * The structural client types the PostgreSQL store accepts, and the mapping of driver errors. Nothing here
 * imports `pg` at run time: a node-postgres `Pool`, `Client` or `PoolClient` fits these shapes as is, and
 * postgres.js, Kysely or Drizzle users wrap their client in a `{ query(text, params) }` object.
 * @module
 */
import { isStoreUnavailableError, StoreUnavailableError } from '../core/errors.js';

/** What a query resolves to: the rows, the affected row count and, for node-postgres, the command tag. */
export interface PgQueryResult {
  /** Result rows, as plain objects keyed by column name. */
  rows: unknown[];
  /** Rows affected (INSERT/UPDATE/DELETE) or returned; `null` when the driver does not know. */
  rowCount: number | null;
  /** The command tag (`'COMMIT'`, `'ROLLBACK'`, …) when the driver reports it (node-postgres does). */
  command?: string;
}

/**
 * Anything that runs one parameterised statement (`$1`, `$2`, …): a node-postgres `Pool`, `Client` or
 * `PoolClient`, or an adapter around another driver.
 */
export interface PgQueryable {
  /** Run `text` with `values` bound to `$1…$n`. */
  query(text: string, values?: unknown[]): Promise<PgQueryResult>;
}

/** A connection checked out of a pool; `release(error)` destroys it instead of returning it. */
export interface PgPoolClient extends PgQueryable {
  /** Return the connection to its pool; pass `true` or an error to discard it. */
  release(destroy?: boolean | Error): void;
}

/**
 * A pool that hands out dedicated connections, as node-postgres's `Pool` does. Needed for transactions
 * (`migrate()`, `postgresTransactional()`), where every statement must run on the same connection.
 */
export interface PgPool extends PgQueryable {
  /** Check out one connection; the caller must `release()` it. */
  connect(): Promise<PgPoolClient>;
}

/**
 * Keep a checked-out node-postgres connection from crashing the process when its backend dies while no
 * query is running (pg emits `'error'`, and a pool only listens on idle connections). Calls `onError`
 * instead; returns the function that removes the listener. A no-op for clients without `on`.
 */
export function guardConnection(client: PgQueryable, onError: (error: Error) => void): () => void {
  const emitter = client as {
    on?: (event: 'error', listener: (error: Error) => void) => unknown;
    removeListener?: (event: 'error', listener: (error: Error) => void) => unknown;
  };
  if (typeof emitter.on !== 'function' || typeof emitter.removeListener !== 'function') {
    return () => {};
  }
  emitter.on('error', onError);
  return () => emitter.removeListener?.('error', onError);
}

/**
 * True for node-postgres's `query_timeout` error: the driver stopped waiting, but the statement was sent
 * and the connection stays busy with it until the server answers (a ROLLBACK sent after it queues behind
 * it and waits a whole timeout more). Other errors without a SQLSTATE either leave the connection idle (a
 * value the driver could not serialise) or fail the next statement at once (a connection that died).
 */
export function isDriverReadTimeout(error: unknown): boolean {
  return (
    error instanceof Error &&
    error.message === 'Query read timeout' &&
    sqlState(error) === undefined
  );
}

/** The subset of a node-postgres `DatabaseError` we read. */
interface PgErrorLike {
  code?: unknown;
  message?: unknown;
}

/** SQLSTATE codes the store and the transactional mode react to. */
export const SqlState = {
  SerializationFailure: '40001',
  DeadlockDetected: '40P01',
  LockNotAvailable: '55P03',
  UndefinedTable: '42P01',
  /** A column that does not exist (a column a later migration adds, on a schema not yet migrated). */
  UndefinedColumn: '42703',
  /** A function that does not exist (the batch functions on a schema not migrated to 0003). */
  UndefinedFunction: '42883',
  /** Permission denied (EXECUTE on the batch functions revoked from the serving role). */
  InsufficientPrivilege: '42501',
  InFailedTransaction: '25P02',
} as const;

/** The SQLSTATE of a driver error, if it has one. */
export function sqlState(error: unknown): string | undefined {
  const code = (error as PgErrorLike | null)?.code;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) ? code : undefined;
}

/** True when retrying the whole transaction may succeed (40001 serialization failure, 40P01 deadlock). */
export function isRetryableTransactionError(error: unknown): boolean {
  const state = sqlState(error);
  return state === SqlState.SerializationFailure || state === SqlState.DeadlockDetected;
}

/**
 * Columns that migrations after 0001 add, with the migration that adds each. The store's statements name
 * them, so on a table not yet migrated that far they fail with 42703 (undefined column).
 */
const MIGRATED_COLUMNS: ReadonlyArray<{ column: string; migration: string }> = [
  { column: 'reserved_until', migration: '0005_reservations_and_steps' },
  { column: 'steps', migration: '0005_reservations_and_steps' },
];

// The column a 42703 message names: `column "steps" of relation "t" does not exist` (an INSERT's or an
// UPDATE's target), `column "steps" does not exist`, or `column r.steps does not exist` (qualified).
const UNDEFINED_COLUMN = /\bcolumn (?:"?\w+"?\.)?"?(\w+)"? /;

/** The fix a driver error calls for, as a parenthesised hint, or `''`. */
function fixHint(error: unknown, message: string): string {
  const state = sqlState(error);
  // A claim answers a row held by another transaction in progress, not with an error: what gets here is
  // mostly a lock on the table itself, which an operator must find and end.
  if (state === SqlState.LockNotAvailable) {
    return ' (a lock was not granted within the lock timeout: another session holds or awaits a conflicting lock, such as an ALTER TABLE, LOCK TABLE, VACUUM FULL or REINDEX of the records table; see pg_locks)';
  }
  if (state === SqlState.UndefinedTable)
    return ' (run migrate() or `idempotency-kit migrate` first)';
  if (state !== SqlState.UndefinedColumn) return '';
  const named = UNDEFINED_COLUMN.exec(message)?.[1];
  const missing = MIGRATED_COLUMNS.find(({ column }) => column === named);
  return missing === undefined
    ? ''
    : ` (the records table lacks migration ${missing.migration}: run migrate() or \`idempotency-kit migrate\` first)`;
}

/**
 * Wrap a driver error as `StoreUnavailableError` (fail closed), keeping it as `cause`. A missing table, a
 * column that a migration not yet applied adds, or a lock timeout gets a message that names the fix.
 */
export function toStoreError(operation: string, error: unknown): StoreUnavailableError {
  if (isStoreUnavailableError(error)) return error;
  const message = String((error as PgErrorLike | null)?.message ?? error);
  const hint = fixHint(error, message);
  return new StoreUnavailableError(
    `PostgreSQL store failed during ${operation}: ${message}${hint}`,
    {
      cause: error,
    },
  );
}

/**
 * True when `value` is a node-postgres `Pool`, `Client` or `PoolClient`, which also accept a
 * `{ name, text, values }` query config for named prepared statements.
 */
export function isNodePostgres(value: PgQueryable): boolean {
  return (
    typeof value === 'object' &&
    value !== null &&
    ('totalCount' in value || 'connectionParameters' in value)
  );
}

/** True when `value` looks like a pool that can hand out dedicated connections. */
export function isPool(value: PgQueryable): value is PgPool {
  // A node-postgres Client also has connect(), but it resolves to nothing and may only be called once;
  // pools expose their counters, clients do not.
  const candidate = value as Partial<PgPool> & { totalCount?: unknown };
  return typeof candidate.connect === 'function' && typeof candidate.totalCount === 'number';
}
