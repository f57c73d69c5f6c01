/**
 * Keeping a `sqliteTransactional` handler from ending the transaction its claim is in. The handler gets the
 * caller's own connection, so a `COMMIT` or `ROLLBACK` it runs (a helper written for a plain connection, a
 * "start over" in an error path) ends that transaction: a `ROLLBACK` dropped the claim and let the writes
 * after it commit in autocommit with no record, so the retry ran the handler again (a second charge); a
 * `COMMIT` committed the claim, in progress for an hour, with part of the writes. The PostgreSQL mode refuses
 * such statements on `tx` (`../postgres/transaction-control.ts`); here the connection is the caller's
 * object, so it gets an `exec` and a `prepare` of its own (on its first run) that refuse them while a
 * handler runs, and pass everything through otherwise.
 * @module
 */
import { InvalidOptionsError } from '../core/errors.js';
import { isTransactionControl } from '../postgres/transaction-control.js';
import type { SqliteDatabase } from './client.js';

// The methods a handler sends SQL text through. better-sqlite3's own `db.transaction()` prepares its
// BEGIN, COMMIT and SAVEPOINT statements on the native handle, not through these: nesting keeps working.
const GUARDED = ['exec', 'prepare'] as const;

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
    'runInTransaction: the transaction ended under the handler (a COMMIT or ROLLBACK among several ' +
      'statements, one prepared before the handler ran, or an error SQLite rolls back on, such as ' +
      'SQLITE_FULL, caught and ignored). The outcome was not recorded: writes made before a COMMIT, or ' +
      'after the end, may have been committed without it.',
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

/**
 * Give `db` an `exec` and a `prepare` of its own that refuse SQL beginning with a transaction-control
 * keyword (`isTransactionControl`: savepoints pass) while `state.running`, and otherwise call the methods
 * they replace. `null` when they cannot be replaced (a frozen object).
 */
function install(db: object): GuardState | null {
  const state: GuardState = { running: false };
  const target = db as Record<string, unknown>;
  try {
    for (const name of GUARDED) {
      const original = target[name];
      if (typeof original !== 'function') continue;
      Object.defineProperty(target, name, {
        configurable: true,
        writable: true,
        value: function guardedMethod(this: unknown, ...args: unknown[]): unknown {
          if (state.running && isTransactionControl(args[0])) throw transactionControlError();
          return Reflect.apply(original, this, args);
        },
      });
    }
  } catch {
    // Not extensible, or a method not configurable: unguarded (see guardedRun).
    return null;
  }
  return state;
}

/**
 * Run `body` with `db.exec` and `db.prepare` refusing SQL that would end the transaction (see the module).
 * Synchronous, so nothing but `body` runs on the connection meanwhile; outside it they pass everything
 * through, a reference `body` kept to one included. A connection whose methods cannot be replaced runs
 * `body` unguarded: the caller's check of `inTransaction` afterwards still catches a transaction that ended.
 */
export function guardedRun<T>(db: SqliteDatabase, body: () => T): T {
  let state = guarded.get(db);
  if (state === undefined) {
    state = install(db);
    guarded.set(db, state);
  }
  if (state === null || state.running) return body();
  state.running = true;
  try {
    return body();
  } finally {
    state.running = false;
  }
}
