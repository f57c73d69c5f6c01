/**
 * The structural client types the outbox accepts. Nothing here imports `pg` or `better-sqlite3` at run
 * time: a node-postgres `Pool`, `PoolClient` or `Client`, and a better-sqlite3 `Database`, fit these shapes as
 * they are.
 * @module
 */

/** What a PostgreSQL query resolves to. */
export interface PgResult {
  /** Result rows keyed by column name. */
  rows: unknown[];
  /** Rows affected or returned; `null` when the driver does not know. */
  rowCount: number | null;
}

/**
 * Anything that runs one parameterised statement (`$1`, `$2`, …): a node-postgres `Pool`, `Client` or
 * `PoolClient`, the PostgreSQL store's transactional `tx`, or an adapter around another driver.
 */
export interface PgQueryable {
  /** Run `text` with `values` bound to `$1…$n`. */
  query(text: string, values?: unknown[]): Promise<PgResult>;
}

/** A connection checked out of a pool, as node-postgres's `PoolClient`. */
export interface PgPoolClient extends PgQueryable {
  /** Return the connection; pass `true` or an error to destroy it instead. */
  release(destroy?: boolean | Error): void;
  /** Subscribe to `notification` (LISTEN) and `error` events. */
  on(event: 'notification' | 'error', listener: (value: unknown) => void): unknown;
  /** Unsubscribe. */
  removeListener(event: 'notification' | 'error', listener: (value: unknown) => void): unknown;
}

/** A pool that hands out dedicated connections (node-postgres `Pool`). */
export interface PgPool extends PgQueryable {
  /** Check out one connection; the caller must `release()` it. */
  connect(): Promise<PgPoolClient>;
}

/** A prepared better-sqlite3 statement. */
export interface SqliteStatementLike {
  /** Run a writing statement. */
  run(parameters?: Record<string, unknown>): { changes: number };
  /** First row or `undefined`. */
  get(parameters?: Record<string, unknown>): unknown;
  /** Every row. */
  all(parameters?: Record<string, unknown>): unknown[];
}

/** A function wrapped by better-sqlite3's `Database#transaction`. */
export interface SqliteTransactionLike<T> {
  /** Run inside `BEGIN` (deferred). */
  (): T;
  /** Run inside `BEGIN IMMEDIATE`: takes the write lock first. */
  immediate(): T;
}

/** An open better-sqlite3 `Database` (version 12), or anything with the same shape. */
export interface SqliteDatabaseLike {
  /** Compile a statement. */
  prepare(source: string): SqliteStatementLike;
  /** Run statements without results. */
  exec(source: string): unknown;
  /** Wrap `fn` in a transaction (a savepoint when one is already open). */
  transaction<T>(fn: () => T): SqliteTransactionLike<T>;
  /** Whether a transaction is open on this connection. */
  readonly inTransaction: boolean;
  /** Whether the connection is open. */
  readonly open: boolean;
}

/** True when `handle` is a better-sqlite3 `Database` rather than a PostgreSQL client. */
export function isSqliteDatabase(handle: unknown): handle is SqliteDatabaseLike {
  const candidate = handle as Partial<SqliteDatabaseLike> | null;
  return (
    typeof candidate?.prepare === 'function' &&
    typeof candidate.transaction === 'function' &&
    typeof candidate.inTransaction === 'boolean'
  );
}

/** True when `handle` can run PostgreSQL queries. */
export function isPgQueryable(handle: unknown): handle is PgQueryable {
  return typeof (handle as Partial<PgQueryable> | null)?.query === 'function';
}

/** True when `value` is a pool that hands out dedicated connections (node-postgres `Pool`). */
export function isPgPool(value: PgQueryable): value is PgPool {
  // A node-postgres Client has connect() too, but resolves to nothing and may be called once only; pools
  // expose their counters, clients do not.
  const candidate = value as Partial<PgPool> & { totalCount?: unknown };
  return typeof candidate.connect === 'function' && typeof candidate.totalCount === 'number';
}
