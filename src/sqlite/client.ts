/**
 * The slice of better-sqlite3 the SQLite store uses, typed structurally so `idempotency-kit/sqlite` needs
 * no runtime import of the driver (nor its types) until it opens a file itself, and the lazy loader that
 * does so.
 * @module
 */
import { createRequire } from 'node:module';
import { MAX_TIMER_MS } from '../core/duration.js';
import { InvalidOptionsError, StoreUnavailableError } from '../core/errors.js';
import { durationOption } from '../core/option-checks.js';

/** The result of running a writing statement. */
export interface SqliteRunResult {
  /** Rows inserted, updated or deleted by the statement itself. */
  changes: number;
}

/** A prepared statement (better-sqlite3 `Statement`). */
export interface SqliteStatement {
  /** Execute a writing statement with named parameters. */
  run(parameters: Record<string, unknown>): SqliteRunResult;
  /** Execute and return the first row, or `undefined`. */
  get(parameters?: Record<string, unknown>): unknown;
  /** Execute and return every row. */
  all(parameters?: Record<string, unknown>): unknown[];
  /** Return integers as `bigint` (true) or `number` (false) for this statement. */
  safeIntegers(toggle?: boolean): this;
}

/** A function wrapped by `Database#transaction`, with its locking variants. */
export interface SqliteTransaction<A extends unknown[], T> {
  /** Run inside `BEGIN` (deferred). */
  (...args: A): T;
  /** Run inside `BEGIN IMMEDIATE`: takes the write lock first, so no other writer can interleave. */
  immediate(...args: A): T;
}

/**
 * An open better-sqlite3 `Database` (version 12), or anything with the same shape. The store uses it
 * synchronously, so each call is atomic within the process; across processes, SQLite's locks serialise
 * writers.
 */
export interface SqliteDatabase {
  /** Compile a statement. */
  prepare(source: string): SqliteStatement;
  /** Run one or more statements without results. */
  exec(source: string): unknown;
  /** Run a `PRAGMA`; with `{ simple: true }` the first column of the first row. */
  pragma(source: string, options?: { simple?: boolean }): unknown;
  /** Wrap `fn` so that it runs in a transaction (a savepoint when one is already open). */
  transaction<A extends unknown[], T>(fn: (...args: A) => T): SqliteTransaction<A, T>;
  /** Close the connection. */
  close(): unknown;
  /** Whether the connection is open. */
  readonly open: boolean;
  /** Whether a transaction is open on this connection. */
  readonly inTransaction: boolean;
  /** The file name the connection was opened with. */
  readonly name: string;
}

/** Options of the lazily loaded better-sqlite3 constructor used when the store opens a file itself. */
interface SqliteOpenOptions {
  /** Busy timeout in ms. */
  timeout?: number;
}

type SqliteConstructor = new (filename: string, options?: SqliteOpenOptions) => SqliteDatabase;

let driver: SqliteConstructor | undefined;

// better-sqlite3 is an optional peer: it is required on first use only, so `idempotency-kit/sqlite` loads
// (and a user who passes their own Database never needs the lookup) without it.
function loadDriver(): SqliteConstructor {
  if (driver !== undefined) return driver;
  try {
    const required = createRequire(import.meta.url)('better-sqlite3') as
      | SqliteConstructor
      | { default: SqliteConstructor };
    driver = typeof required === 'function' ? required : required.default;
    return driver;
  } catch (error) {
    throw new InvalidOptionsError(
      'idempotency-kit/sqlite needs the optional peer dependency better-sqlite3 (^12) to open a file: ' +
        'run `npm install better-sqlite3`, or pass an open Database as `database`',
      { cause: error },
    );
  }
}

/**
 * Open `filename` with better-sqlite3 (loaded on first use).
 * @throws InvalidOptionsError for an empty path; StoreUnavailableError when the file cannot be opened.
 */
export function openDatabase(filename: string, busyTimeoutMs: number): SqliteDatabase {
  // SQLite opens '' as a private temporary database, deleted on close: records no other process sees,
  // lost on restart. Almost always an unset variable; ':memory:' asks for that on purpose.
  if (filename === '') {
    throw new InvalidOptionsError(
      "idempotency-kit/sqlite: the database path is an empty string: give a file path (or ':memory:' " +
        'for a database that lives and dies with this connection)',
    );
  }
  const Database = loadDriver();
  try {
    return new Database(filename, { timeout: busyTimeoutMs });
  } catch (error) {
    throw unavailable(`opening ${filename}`, error);
  }
}

/**
 * `busyTimeoutMs` of a file the store or `migrate` opens: whole ms (it is written into a PRAGMA), at most
 * the 32-bit limit SQLite and better-sqlite3 take.
 */
export function busyTimeoutOption(value: unknown, who: string): number {
  return durationOption(value, `${who}: busyTimeoutMs`, 5000, {
    allowZero: true,
    integer: true,
    maxMs: MAX_TIMER_MS,
  });
}

/** The better-sqlite3 error code of a driver failure (`SQLITE_BUSY`, …), if it has one. */
export function driverCode(error: unknown): string | undefined {
  return typeof error === 'object' && error !== null && 'code' in error
    ? String(error.code)
    : undefined;
}

/**
 * Wrap a driver failure (SQLITE_BUSY past the busy timeout, a closed connection, an I/O error…) in a
 * `StoreUnavailableError` that keeps the original as `cause`: callers fail closed and may retry.
 */
export function unavailable(action: string, error: unknown): StoreUnavailableError {
  const code = driverCode(error);
  const detail = error instanceof Error ? error.message : String(error);
  return new StoreUnavailableError(
    `SQLite store: ${action} failed${code === undefined ? '' : ` (${code})`}: ${detail}`,
    { cause: error },
  );
}
