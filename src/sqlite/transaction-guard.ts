/**
 * Keeping a `sqliteTransactional` handler from ending the transaction its claim is in. The handler gets the
 * caller's own connection, so a `COMMIT` or `ROLLBACK` it runs (a helper written for a plain connection, a
 * "start over" in an error path) ends that transaction: a `ROLLBACK` dropped the claim and let the writes
 * after it commit in autocommit with no record, so the retry ran the handler again (a second charge); a
 * `COMMIT` committed the claim, in progress for an hour, with part of the writes. The PostgreSQL mode refuses
 * such statements on `tx` (`../postgres/transaction-control.ts`); here the connection is the caller's
 * object, so it gets an `exec` and a `prepare` of its own (when `sqliteTransactional` is created on it) that
 * find such statements as SQLite reads the text (`statement-scan.ts`): `exec` refuses a text with one among
 * its statements while a handler runs; `prepare` compiles one as always but returns it wrapped, so that
 * running it refuses while a handler runs, wherever it was prepared. Everything else passes through.
 * @module
 */
import { InvalidOptionsError } from '../core/errors.js';
import type { SqliteDatabase } from './client.js';
import { endsTransaction, firstStatementWords, statementWords } from './statement-scan.js';

/** The refusal of a statement that would end the transaction (see the module). */
export function transactionControlError(): InvalidOptionsError {
  return new InvalidOptionsError(
    'runInTransaction: the handler ran a statement that ends the transaction (BEGIN, COMMIT, ROLLBACK, ' +
      'END) on the connection. It was not run: the record commits with your writes when the handler ' +
      'returns, and a throw rolls both back. Nested db.transaction() calls (savepoints) are fine.',
  );
}

/** The error of a run whose transaction ended under the handler anyway (nothing is completed). */
export function transactionEndedError(): InvalidOptionsError {
  return new InvalidOptionsError(
    'runInTransaction: the transaction ended under the handler (a COMMIT or ROLLBACK prepared before ' +
      'sqliteTransactional was created on the connection, or an error SQLite rolls back on, such as an ' +
      'INSERT OR ROLLBACK conflict or SQLITE_FULL, caught and ignored). The outcome was not recorded: ' +
      'writes made before a COMMIT, or after the end, may have been committed without it.',
  );
}

/** Whether a handler is running on a connection whose methods are guarded (see {@link guardedRun}). */
interface GuardState {
  running: boolean;
}

// The guarded connections. Their methods are replaced once, for good, rather than around each run:
// replacing and deleting two properties of the connection per run changed its shape every time, which
// cost a large share of a run's throughput (V8 deoptimises code that meets an object of changing shape).
const guarded = new WeakMap<object, GuardState | null>();

// The methods of a statement that execute it.
const EXECUTES = new Set<PropertyKey>(['run', 'get', 'all', 'iterate']);

/**
 * `statement` (a transaction-control statement prepared on a guarded connection) behind a proxy whose
 * run/get/all/iterate refuse while a handler runs on that connection. Only such statements are wrapped:
 * every other one keeps its identity and its speed. better-sqlite3's methods are native and want the
 * statement itself as `this`, so they are called on it, and one that returns it (`bind`, `safeIntegers`,
 * `raw`…) returns the proxy, which a chain such as `prepare('COMMIT').safeIntegers().run()` keeps.
 */
function guardedStatement<S extends object>(statement: S, state: GuardState): S {
  // One wrapper per method, so `proxy.run === proxy.run`; a method patched later gets a new one.
  const wrappers = new Map<PropertyKey, { method: unknown; wrapper: unknown }>();
  const proxy: S = new Proxy(statement, {
    get(target, key) {
      const method: unknown = Reflect.get(target, key);
      if (typeof method !== 'function') return method;
      const known = wrappers.get(key);
      if (known?.method === method) return known.wrapper;
      const executes = EXECUTES.has(key);
      const wrapper = function guardedStatementMethod(this: unknown, ...args: unknown[]): unknown {
        if (executes && state.running) throw transactionControlError();
        const result: unknown = Reflect.apply(method, this === proxy ? target : this, args);
        return result === target ? proxy : result;
      };
      wrappers.set(key, { method, wrapper });
      return wrapper;
    },
  });
  return proxy;
}

/**
 * The method `name` of `db` as it is when called: an own property `db` had before the guard replaced it
 * (the caller's own wrapper) stays the one called; otherwise it is looked up on the prototype at each
 * call, so a later patch of `Database.prototype` (instrumentation, a spy) still sees this connection.
 */
function currentMethod(db: object, name: string): (self: unknown, args: unknown[]) => unknown {
  if (Object.hasOwn(db, name)) {
    const own = (db as Record<string, unknown>)[name] as (...args: unknown[]) => unknown;
    return (self, args) => Reflect.apply(own, self, args);
  }
  return (self, args) =>
    Reflect.apply(
      Reflect.get(Object.getPrototypeOf(db) as object, name, self) as (...a: unknown[]) => unknown,
      self,
      args,
    );
}

/** `exec` and `prepare` as the guard replaces them (see the module), given the methods they call. */
function guardedMethods(
  state: GuardState,
  exec: (self: unknown, args: unknown[]) => unknown,
  prepare: (self: unknown, args: unknown[]) => unknown,
) {
  return {
    exec: function guardedExec(this: unknown, ...args: unknown[]): unknown {
      // Every statement of the text: exec runs them in turn, so one after the first ends it just as well,
      // after the writes before it and before those after it (which would commit with no record).
      const [source] = args;
      if (
        state.running &&
        typeof source === 'string' &&
        statementWords(source).some((words) => endsTransaction(words))
      ) {
        throw transactionControlError();
      }
      return exec(this, args);
    },
    prepare: function guardedPrepare(this: unknown, ...args: unknown[]): unknown {
      // Refused when run, not here: code that prepares its statements ahead (a lazily filled cache) may
      // prepare a COMMIT inside a handler that never runs it, and one prepared before a run is caught too.
      const statement = prepare(this, args);
      const [source] = args;
      return typeof source === 'string' &&
        typeof statement === 'object' &&
        statement !== null &&
        endsTransaction(firstStatementWords(source))
        ? guardedStatement(statement, state)
        : statement;
    },
  };
}

/**
 * Give `db` an `exec` and a `prepare` of its own (see {@link guardedMethods}). `null` when they cannot be
 * replaced (a frozen object). A method `db` lacks is left out.
 */
function install(db: object): GuardState | null {
  const target = db as Record<string, unknown>;
  const state: GuardState = { running: false };
  const methods = guardedMethods(state, currentMethod(db, 'exec'), currentMethod(db, 'prepare'));
  try {
    for (const [name, value] of Object.entries(methods)) {
      if (typeof target[name] !== 'function') continue;
      Object.defineProperty(target, name, { configurable: true, writable: true, value });
    }
  } catch {
    // Not extensible, or a method not configurable: unguarded (see guardedRun).
    return null;
  }
  return state;
}

/**
 * Guard `db` (see the module) if it is not yet: from then on, a transaction-control statement it prepares
 * refuses to run inside a handler. `sqliteTransactional` calls it when it is created, so statements the
 * application prepares afterwards, before any run, are covered; a statement prepared before that is not
 * (the check of `inTransaction` after the handler still sees the transaction it ended).
 */
export function guardConnection(db: SqliteDatabase): void {
  if (!guarded.has(db)) guarded.set(db, install(db));
}

/**
 * Run `body` with `db.exec` and `db.prepare` refusing SQL that would end the transaction (see the module).
 * Synchronous, so nothing but `body` runs on the connection meanwhile; outside it they pass everything
 * through, a reference `body` kept to one included. A connection whose methods cannot be replaced runs
 * `body` unguarded: the caller's check of `inTransaction` afterwards still catches a transaction that ended.
 */
export function guardedRun<T>(db: SqliteDatabase, body: () => T): T {
  guardConnection(db);
  const state = guarded.get(db);
  if (state === undefined || state === null || state.running) return body();
  state.running = true;
  try {
    return body();
  } finally {
    state.running = false;
  }
}
