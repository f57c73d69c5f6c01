/**
 * Keeping a `sqliteTransactional` handler from ending the transaction its claim is in, and from writing
 * after it ended. The handler gets the caller's own connection, so a `COMMIT` or `ROLLBACK` it runs (a
 * helper written for a plain connection, a "start over" in an error path) ends that transaction: a
 * `ROLLBACK` dropped the claim and let the writes after it commit in autocommit with no record, so the retry
 * ran the handler again (a second charge); a `COMMIT` committed the claim, in progress for an hour, with part
 * of the writes. The PostgreSQL mode refuses such statements on `tx` (`../postgres/transaction-control.ts`);
 * here the connection is the caller's object, so its SQL is checked where it runs, finding such statements
 * as SQLite reads the text (`statement-scan.ts`): `exec` refuses a text with one among its statements while
 * a handler runs, and the connection gets a `prepare` of its own (when `sqliteTransactional` is created on
 * it) that compiles one as always but returns it wrapped, so that running it refuses while a handler runs,
 * wherever it was prepared. `exec` is checked on the driver's connection under the `Database` (see
 * {@link guardNativeExec}), which better-sqlite3's `exec` calls at each call: an own `exec` on the
 * `Database` missed one bound before the guard and `Database.prototype.exec.call(db, …)`, whose
 * `ROLLBACK; INSERT …`, or writes after an end SQLite made, committed with no record (a retry charged
 * again). Only where that connection cannot be reached does the `Database` get an `exec` of its own.
 *
 * SQLite also ends the transaction on its own: an `INSERT OR ROLLBACK` conflict, a trigger's
 * `RAISE(ROLLBACK, …)`, `SQLITE_FULL` or an I/O error roll it back, the claim with it. A handler that caught
 * that error and went on writing committed those writes in autocommit with no record, and the retry ran it
 * again. Nor did `prepare` see a statement prepared before the guard. So every execution of a statement is
 * checked as well: while a handler runs on a guarded connection, a statement refuses to run when the
 * connection is no longer in a transaction (whoever prepared it: the application before the guard,
 * `db.transaction()` for its BEGIN, `db.pragma()`), as `exec` does, so nothing commits after the end; and
 * one that would end the transaction refuses too. So does the first step of a writing statement's iterator
 * (an `INSERT … RETURNING` writes at its first `next`, which unsafe mode lets run after an end even if
 * `iterate` ran before it). better-sqlite3 has no commit hook and exposes no
 * authorizer, and a statement prepared before the guard is reachable only through the prototype all
 * statements share, so its `run`, `get`, `all` and `iterate` are wrapped, once per process (see
 * {@link guardStatements}). The statements keep their identity and their shape (no proxy, no own property:
 * V8 keeps its fast paths); outside every handler a call costs one counter check more, inside one a
 * WeakMap lookup, `inTransaction` and two properties. Measured (best of 60 interleaved rounds of 5,000
 * calls, a WAL file): a cached `SELECT 1` 336 ns unwrapped, 347 ns wrapped outside a handler, 385 ns inside
 * one; an `INSERT` 888, 905 and 933 ns; against a run's tens of microseconds (claim, completion, COMMIT).
 * The driver's `exec` and the iterators' `next` cost the same counter check outside every handler. The
 * proxy of `prepare` stays: it still refuses where the prototype could not be wrapped. What a run
 * records when its transaction ended anyway is `transactional.ts`'s.
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

/**
 * What committed of a run whose transaction ended under the handler: `nothing` (rolled back, the claim
 * included, and every statement after the end refused), `recorded` (the key is completed with the run's
 * error: a COMMIT committed the claim with the writes before it, or writes after the end may have committed
 * on a connection that could not be guarded, and the key was claimed anew for it), `completed` (a COMMIT in
 * `beforeCommit` committed the record, completed with the handler's value) or `unrecorded` (writes may have
 * committed, and recording the error failed).
 */
export type EndedCommit = 'nothing' | 'recorded' | 'completed' | 'unrecorded';

/** The error of a run whose transaction ended under the handler anyway (see the module and {@link EndedCommit}). */
export function transactionEndedError(committed: EndedCommit): InvalidOptionsError {
  const cause =
    'runInTransaction: the transaction ended under the handler (an error SQLite rolls back on, such as ' +
    'an INSERT OR ROLLBACK conflict, a RAISE(ROLLBACK) or SQLITE_FULL, caught and ignored, or a COMMIT or ' +
    'ROLLBACK prepared before sqliteTransactional was created on the connection). ';
  const consequence = {
    nothing:
      'Everything was rolled back, the record included, and nothing ran after the end: a retry runs the ' +
      'handler again.',
    recorded:
      'Writes may have committed (before a COMMIT, or after the end on a connection that could not be ' +
      'guarded): the key is completed with this error as its outcome, so a retry gets it back ' +
      '(ReplayedError) instead of running the handler again.',
    completed:
      "A COMMIT committed the record, completed with the handler's value, with the writes before it: a " +
      'retry replays that value.',
    unrecorded:
      'Writes may have committed, and this error could not be recorded for the key: a retry may run the ' +
      'handler again.',
  }[committed];
  return new InvalidOptionsError(cause + consequence);
}

/** The refusal of a statement run after the transaction ended under the handler (see the module). */
export function statementAfterEndError(): InvalidOptionsError {
  return new InvalidOptionsError(
    'runInTransaction: the transaction the handler runs in has ended (SQLite rolled it back on an error ' +
      'the handler caught, such as an INSERT OR ROLLBACK conflict, a RAISE(ROLLBACK) or SQLITE_FULL, or a ' +
      'COMMIT or ROLLBACK prepared before sqliteTransactional was created on the connection ran). The ' +
      'statement was not run: it would have committed on its own, with no record. Let that error propagate.',
  );
}

/** Whether a handler is running on a connection whose methods are guarded (see {@link guardedRun}). */
interface GuardState {
  running: boolean;
  /** Whether the connection's statements check the end of the transaction (see {@link guardStatements}). */
  statements: boolean;
  /** Whether its driver-side `exec` is checked, however it is reached (see {@link guardNativeExec}). */
  exec: boolean;
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

/**
 * Refuse an `exec` of `source` on `connection` (the `Database`, or the driver's connection under it: both
 * have `inTransaction`) while a handler runs on it (`state`), as {@link checkExecution} does a statement's.
 */
function checkExec(state: GuardState | undefined, connection: unknown, source: unknown): void {
  if (state?.running !== true) return;
  // After an end SQLite made (see the module): nothing of the text may commit on its own.
  if ((connection as { inTransaction?: unknown } | undefined)?.inTransaction === false) {
    throw statementAfterEndError();
  }
  // Every statement of the text: exec runs them in turn, so one after the first ends it just as well,
  // after the writes before it and before those after it (which would commit with no record).
  if (
    typeof source === 'string' &&
    statementWords(source).some((words) => endsTransaction(words))
  ) {
    throw transactionControlError();
  }
}

/** `exec` and `prepare` as the guard replaces them (see the module), given the methods they call. */
function guardedMethods(
  state: GuardState,
  exec: (self: unknown, args: unknown[]) => unknown,
  prepare: (self: unknown, args: unknown[]) => unknown,
) {
  return {
    exec: function guardedExec(this: unknown, ...args: unknown[]): unknown {
      checkExec(state, this, args[0]);
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
 * Give `db` a `prepare` of its own, and an `exec` unless the driver's is checked (see
 * {@link guardedMethods} and {@link guardNativeExec}). `null` when they cannot be replaced (a frozen
 * object). A method `db` lacks is left out.
 */
function install(db: object): GuardState | null {
  const target = db as Record<string, unknown>;
  const prepare = currentMethod(db, 'prepare');
  const connection = guardNativeExec(db);
  const state: GuardState = {
    running: false,
    statements: guardStatements(db, prepare),
    exec: connection !== undefined,
  };
  const methods = guardedMethods(state, currentMethod(db, 'exec'), prepare);
  try {
    for (const [name, value] of Object.entries(methods)) {
      // The driver's exec checks every text already, an exec bound before the guard's included.
      if (typeof target[name] !== 'function' || (name === 'exec' && state.exec)) continue;
      Object.defineProperty(target, name, { configurable: true, writable: true, value });
    }
  } catch {
    // Not extensible, or a method not configurable: unguarded (see guardedRun).
    return null;
  }
  if (connection !== undefined) nativeStates.set(connection, state);
  return state;
}

// How many guarded runs are in progress, on any connection: while none is, a statement's execution costs
// one comparison more than better-sqlite3's own.
let running = 0;

// The statement prototypes whose executing methods are wrapped (one per loaded copy of better-sqlite3).
const guardedPrototypes = new WeakSet<object>();

// Whether a statement ends the transaction (see statement-scan.ts), by statement: read once from its text.
const endingStatements = new WeakMap<object, boolean>();

/** The parts of a better-sqlite3 statement {@link checkExecution} reads (own data properties). */
interface StatementFacts {
  database?: unknown;
  reader?: unknown;
  readonly?: unknown;
  source?: unknown;
}

/**
 * Whether `statement` ends the transaction. Only a statement that returns no rows yet writes nothing can:
 * SQLite counts BEGIN, COMMIT, ROLLBACK, SAVEPOINT and RELEASE as read-only, so the handler's SELECTs and
 * writes are told apart by two properties, and only those few statements have their text read.
 */
function endsTransactionStatement(statement: StatementFacts): boolean {
  if (statement.reader !== false || statement.readonly !== true) return false;
  let ends = endingStatements.get(statement);
  if (ends === undefined) {
    const { source } = statement;
    ends = typeof source === 'string' && endsTransaction(firstStatementWords(source));
    endingStatements.set(statement, ends);
  }
  return ends;
}

/**
 * Refuse `statement`'s execution while a handler runs on its (guarded) connection if the handler's
 * transaction has ended, or if it would end it: a COMMIT or ROLLBACK prepared before the guard, which
 * `prepare` never wrapped, included.
 */
function checkExecution(statement: StatementFacts | null): void {
  const db = statement?.database;
  if (typeof db !== 'object' || db === null || guarded.get(db)?.running !== true) return;
  if (!(db as SqliteDatabase).inTransaction) throw statementAfterEndError();
  if (endsTransactionStatement(statement as StatementFacts)) throw transactionControlError();
}

/**
 * Wrap `run`, `get`, `all` and `iterate` of the prototype of `db`'s statements (once per prototype: each
 * loaded copy of better-sqlite3 has its own) so that they call {@link checkExecution} while a handler runs
 * anywhere; whether `db`'s statements are checked. The methods found there are the ones called (a patch
 * made before stays in force, one made later wraps ours). Not for a prototype that does not own all four
 * (an object that only looks like a connection) or cannot be changed (frozen).
 */
function guardStatements(
  db: object,
  prepare: (self: unknown, args: unknown[]) => unknown,
): boolean {
  let prototype: unknown;
  try {
    prototype = Object.getPrototypeOf(prepare(db, ['SELECT 1']));
  } catch {
    return false; // closed, or not a connection
  }
  if (typeof prototype !== 'object' || prototype === null || prototype === Object.prototype)
    return false;
  if (guardedPrototypes.has(prototype)) return true;
  const target = prototype as Record<string, unknown>;
  const names = [...EXECUTES] as string[];
  if (!names.every((name) => Object.hasOwn(target, name) && typeof target[name] === 'function')) {
    return false;
  }
  try {
    for (const name of names) {
      const execute = target[name] as (...args: unknown[]) => unknown;
      Object.defineProperty(target, name, {
        configurable: true,
        enumerable: true,
        writable: true,
        // A rest parameter and Reflect.apply: as fast as `arguments` in the micro-benchmark.
        value:
          name === 'iterate'
            ? function guardedIterate(this: unknown, ...args: unknown[]): unknown {
                if (running === 0) {
                  const iterator = Reflect.apply(execute, this, args);
                  // Opened before a run, its first step may come inside one, after an end (unsafe mode).
                  if ((this as StatementFacts | null)?.readonly === false) {
                    watchFirstStep(this as StatementFacts, iterator);
                  }
                  return iterator;
                }
                checkExecution(this as StatementFacts | null);
                const iterator = Reflect.apply(execute, this, args);
                watchFirstStep(this as StatementFacts | null, iterator);
                return iterator;
              }
            : function guardedExecution(this: unknown, ...args: unknown[]): unknown {
                if (running !== 0) checkExecution(this as StatementFacts | null);
                return Reflect.apply(execute, this, args);
              },
      });
    }
  } catch {
    return false;
  }
  guardedPrototypes.add(prototype);
  return true;
}

// The driver's connections (see guardNativeExec) of the guarded ones, and the prototypes whose exec is
// wrapped (one per loaded copy of better-sqlite3's addon).
const nativeStates = new WeakMap<object, GuardState>();
const guardedNativePrototypes = new WeakSet<object>();

/**
 * The driver's connection under `db`: better-sqlite3's `Database` keeps it in a symbol-keyed property and
 * its `exec` calls that object's `exec` at each call (`this[cppdb].exec(sql)`), so wrapping `exec` on that
 * object's prototype checks every text the connection runs, through an `exec` bound before the guard or
 * `Database.prototype.exec.call(db, …)` too, which an own `exec` on `db` could not see. Wrapped once per
 * prototype; outside every handler a call costs one comparison more. `undefined` for an object that has no
 * such connection, or whose prototype cannot be changed: `db` then gets an `exec` of its own (see
 * {@link install}), and {@link guardsEveryStatement} says false.
 */
function guardNativeExec(db: object): object | undefined {
  for (const symbol of Object.getOwnPropertySymbols(db)) {
    const connection = Object.getOwnPropertyDescriptor(db, symbol)?.value as unknown;
    if (typeof connection !== 'object' || connection === null) continue;
    const prototype = Object.getPrototypeOf(connection) as Record<string, unknown> | null;
    if (prototype === null || prototype === Object.prototype) continue;
    if (!Object.hasOwn(prototype, 'exec') || typeof prototype.exec !== 'function') continue;
    if (!('inTransaction' in connection)) continue;
    if (guardedNativePrototypes.has(prototype)) return connection;
    const exec = prototype.exec as (...args: unknown[]) => unknown;
    try {
      Object.defineProperty(prototype, 'exec', {
        configurable: true,
        enumerable: true,
        writable: true,
        value: function guardedNativeExec(this: unknown, ...args: unknown[]): unknown {
          if (running !== 0) checkExec(nativeStates.get(this as object), this, args[0]);
          return Reflect.apply(exec, this, args);
        },
      });
    } catch {
      return undefined;
    }
    guardedNativePrototypes.add(prototype);
    return connection;
  }
  return undefined;
}

// The iterators of writing statements opened on a guarded connection and not stepped inside a handler yet,
// by iterator: their connection. SQLite writes all of an INSERT … RETURNING at its first step, which
// `iterate` leaves to `next`: an iterator opened before an end and stepped after it (unsafeMode lets a
// statement run while one is open) would commit the write in autocommit. That includes one opened before
// the run started, outside every handler: noted too (a writing statement's `iterate` is rare, and costs
// one property read more), and left noted if stepped outside a handler (a later step after an end is
// refused, as every statement then is).
const unstepped = new WeakMap<object, object>();
const guardedIteratorPrototypes = new WeakSet<object>();

/**
 * Note `iterator`, just opened by `statement` on a guarded connection (in a handler or before one), for a
 * check at its first step inside a handler if the statement writes; its prototype's `next` is wrapped the
 * first time (the driver has one iterator class).
 */
function watchFirstStep(statement: StatementFacts | null, iterator: unknown): void {
  const db = statement?.database;
  if (statement?.readonly !== false || typeof iterator !== 'object' || iterator === null) return;
  if (typeof db !== 'object' || db === null || !guarded.get(db)) return;
  const prototype = Object.getPrototypeOf(iterator) as Record<string, unknown> | null;
  if (prototype === null || !guardIteratorPrototype(prototype)) return;
  unstepped.set(iterator, db);
}

/** Wrap `next` of `prototype` (once) to refuse a noted iterator's first step after an end. */
function guardIteratorPrototype(prototype: Record<string, unknown>): boolean {
  if (guardedIteratorPrototypes.has(prototype)) return true;
  const next = prototype.next;
  if (!Object.hasOwn(prototype, 'next') || typeof next !== 'function') return false;
  try {
    Object.defineProperty(prototype, 'next', {
      configurable: true,
      enumerable: true,
      writable: true,
      value: function guardedStep(this: unknown, ...args: unknown[]): unknown {
        const db = running === 0 ? undefined : unstepped.get(this as object);
        if (db !== undefined) {
          if (guarded.get(db)?.running === true && !(db as SqliteDatabase).inTransaction) {
            // Closed, so that nothing steps it later either.
            (this as { return?: () => unknown }).return?.();
            throw statementAfterEndError();
          }
          unstepped.delete(this as object);
        }
        return Reflect.apply(next, this, args);
      },
    });
  } catch {
    return false;
  }
  guardedIteratorPrototypes.add(prototype);
  return true;
}

/**
 * Guard `db` (see the module) if it is not yet: from then on, a transaction-control statement it prepares
 * refuses to run inside a handler. `sqliteTransactional` calls it when it is created, so statements the
 * application prepares afterwards, before any run, are wrapped; one prepared before that is checked when it
 * runs (see {@link checkExecution}), unless the statements' prototype could not be wrapped.
 */
export function guardConnection(db: SqliteDatabase): void {
  if (!guarded.has(db)) guarded.set(db, install(db));
}

/**
 * Run `body` with `db.exec` and `db.prepare` refusing SQL that would end the transaction, and every
 * statement refusing once it has ended (see the module).
 * Synchronous, so nothing but `body` runs on the connection meanwhile; outside it they pass everything
 * through, a reference `body` kept to one included. A connection whose methods cannot be replaced runs
 * `body` unguarded: the caller's check of `inTransaction` afterwards still catches a transaction that ended
 * (and {@link guardsEveryStatement} tells it that writes after the end may have committed).
 */
export function guardedRun<T>(db: SqliteDatabase, body: () => T): T {
  guardConnection(db);
  const state = guarded.get(db);
  if (state === undefined || state === null || state.running) return body();
  state.running = true;
  running++;
  try {
    return body();
  } finally {
    state.running = false;
    running--;
  }
}

/**
 * Whether every statement `db` runs inside a handler is checked for the end of the transaction (see the
 * module), through `exec` however it is reached included: false for a connection that could not be
 * guarded, or whose driver-side `exec` could not be, whose writes after an end may have committed.
 */
export function guardsEveryStatement(db: SqliteDatabase): boolean {
  const state = guarded.get(db);
  return state?.statements === true && state.exec;
}
