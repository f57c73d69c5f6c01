/**
 * Transactional mode on SQLite: the key is claimed inside one `BEGIN IMMEDIATE` transaction on the
 * caller's own better-sqlite3 connection, the handler writes its rows through that connection, and the
 * record is completed before COMMIT. The record, the business rows and any outbox rows therefore commit
 * together or not at all: a crash at any point before COMMIT leaves nothing, and a retry executes once.
 *
 * better-sqlite3 is synchronous and its transactions cannot span an `await`, so the handler must be
 * synchronous. A duplicate from another process waits for SQLite's write lock (the busy timeout), then
 * finds the committed record and replays it. Records are the `sqliteStore`'s: same table, same storage
 * keys, same token counter, so both modes share them.
 * @module
 */
import { bufferView } from '../core/bytes.js';
import { type Clock, systemClock } from '../core/clock.js';
import { type Duration, toMs } from '../core/duration.js';
import type { RunOutcome, RunRequest } from '../core/engine.js';
import { InvalidOptionsError, isIdempotencyError } from '../core/errors.js';
import { createFingerprint } from '../core/fingerprint.js';
import { emit, type HookEvent, type IdempotencyHooks } from '../core/hooks.js';
import { deriveDownstreamKey, validateKey } from '../core/key.js';
import { lookupKey, type StorageKeyOptions } from '../core/lookup-key.js';
import {
  booleanOption,
  callbacksOption,
  codecOption,
  knownFields,
  stringOption,
} from '../core/option-checks.js';
import {
  defaultCodec,
  encodeErrorOutcome,
  encodeValueOutcome,
  type OutcomeCodec,
} from '../core/outcome.js';
import type { IdempotencyRecord } from '../core/record.js';
import { runStorageKey } from '../core/reserved-scopes.js';
import { settleRecord } from '../core/settle.js';
import { isThenable } from '../core/thenable.js';
import { driverCode, type SqliteDatabase, unavailable } from './client.js';
import { migrate as runMigrations } from './migrate.js';
import { onWarningOption, reportMigration, type SqliteStoreWarning } from './schema-warning.js';
import { claimParams, readBlocking, readBlockingNow, toRecord } from './sqlite-store.js';
import {
  type ClaimRow,
  checkTableName,
  DEFAULT_TABLE,
  prepareStatements,
  type Statements,
} from './statements.js';
import {
  guardConnection,
  guardedRun,
  guardsEveryStatement,
  transactionEndedError,
} from './transaction-guard.js';

/** Options of {@link sqliteTransactional}. */
export interface SqliteTransactionalOptions {
  /**
   * Your open better-sqlite3 `Database`: the handler writes through it, so the record must live on the
   * same connection. Never closed, and its pragmas are left as they are (WAL and a busy timeout are
   * recommended: see docs/stores/sqlite.md).
   */
  database: SqliteDatabase;
  /** Name of the records table; use the `sqliteStore`'s to share records with the engine. @default 'idempotency_records' */
  table?: string;
  /** Apply pending migrations of the records table when created. @default true */
  migrate?: boolean;
  /**
   * Receives the warning of that migration, when a newer release migrated the table further than this one
   * knows (as `sqliteStore`'s `onWarning`). @default logs the message with `console.warn`
   */
  onWarning?: (warning: SqliteStoreWarning) => void;
  /** Must equal the engine's `namespace` for records to be shared with `createIdempotency().run`. @default 'default' */
  namespace?: string;
  /** How long a completed outcome is replayed. @default '24h' */
  retentionMs?: Duration;
  /** Encodes outcomes for storage (same envelope as the engine). @default defaultCodec */
  codec?: OutcomeCodec;
  /** Observation callbacks (the engine's hook set). */
  hooks?: IdempotencyHooks;
  /** Judges leases and expiry, as the store's `clock` does (SQLite has none of its own). @default systemClock */
  clock?: Clock;
}

/** A request to run in a transaction: the engine's request without lease or fail-open settings. */
export type SqliteTransactionalRequest = Pick<
  RunRequest,
  'key' | 'scope' | 'fingerprint' | 'payload' | 'retentionMs' | 'codec'
>;

/**
 * What the handler is given: the connection the transaction is open on (write your rows through it, and
 * pass it to anything else that must commit with them, such as the outbox's `enqueue`), plus the claim's
 * details.
 */
export interface SqliteTransactionContext {
  /**
   * The connection, inside the open transaction. Never COMMIT, ROLLBACK or close it yourself: while the
   * handler runs, its `exec` and its statements refuse such SQL with `InvalidOptionsError` (savepoints
   * pass), and refuse every statement once SQLite has ended the transaction on its own (an
   * `INSERT OR ROLLBACK` conflict, a `RAISE(ROLLBACK)`, `SQLITE_FULL`): let that error propagate.
   */
  readonly database: SqliteDatabase;
  /** Fencing token of this execution (from the same counter as the store's claims). */
  readonly token: number;
  /** Record attempt: 1, or more after a takeover of a crashed non-transactional attempt. */
  readonly attempt: number;
  /** The storage key (hashed). */
  readonly storageKey: string;
  /** A stable key for a downstream provider's own deduplication, the same on every attempt. */
  downstreamKey(step: string): string;
}

/** Extra hooks of one call. */
export interface SqliteRunInTransactionOptions {
  /** Runs after the record is completed, right before COMMIT, on the same transaction. Synchronous. */
  beforeCommit?: (tx: SqliteTransactionContext) => void;
}

/**
 * The type a synchronous handler may return: anything but a promise. An `async` handler does not
 * type-check (and is refused at run time): better-sqlite3 cannot keep a transaction open across `await`.
 */
export type SyncResult<T> = T extends PromiseLike<unknown> ? never : T;

/** Runs synchronous handlers with their idempotency record in the same SQLite transaction. */
export interface SqliteTransactional {
  /**
   * Handlers must not return a promise: the transactional routes (`idempotency-kit/express`, `/fastify`,
   * `/fetch`) read this to type their handler as synchronous.
   */
  readonly synchronousHandlers: true;
  /** The connection in use (yours). */
  readonly database: SqliteDatabase;
  /** The records table. */
  readonly table: string;
  /**
   * Run `fn` at most once per (scope, key) while its outcome is retained, with the record committed in
   * the same transaction as `fn`'s writes through `tx.database`. The work happens synchronously, during
   * the call; the promise only carries the result, for symmetry with the PostgreSQL mode.
   *
   * Rejects with `InvalidKeyError`, `InvalidOptionsError` (`fn` returned a promise, a transaction is
   * already open on the connection, or `fn` ended the transaction or tried to: when writes may have
   * committed all the same, the key is completed with that error, which a retry gets back as
   * `ReplayedError`), `StoreUnavailableError`
   * (the database failed or stayed locked past the busy timeout; nothing was committed), `ReplayedError`,
   * or `fn`'s own error after rolling everything back.
   */
  runInTransaction<T>(
    request: SqliteTransactionalRequest,
    fn: (tx: SqliteTransactionContext) => SyncResult<T>,
    options?: SqliteRunInTransactionOptions,
  ): Promise<RunOutcome<T>>;
  /** {@link SqliteTransactional.runInTransaction}, returning the outcome directly and throwing its errors. */
  runInTransactionSync<T>(
    request: SqliteTransactionalRequest,
    fn: (tx: SqliteTransactionContext) => SyncResult<T>,
    options?: SqliteRunInTransactionOptions,
  ): RunOutcome<T>;
  /**
   * The storage key `runInTransaction` uses for (scope, key). For a transactional HTTP route's request,
   * pass `{ http: true }`: a scope it got that starts `consumer:`, `handed-back:` or `dead-letter:` is
   * keyed apart from those components' records (as the engine's `storageKeyFor`).
   */
  storageKeyFor(key: string, scope?: string, options?: StorageKeyOptions): string;
}

// Every key of SqliteTransactionalOptions, checked by the compiler both ways: a misspelt option
// (`retention`) is refused instead of leaving its default in force.
const SQLITE_TRANSACTIONAL_FIELDS = Object.keys({
  database: true,
  table: true,
  migrate: true,
  onWarning: true,
  namespace: true,
  retentionMs: true,
  codec: true,
  hooks: true,
  clock: true,
} as const satisfies Record<keyof SqliteTransactionalOptions, true>);

// The record is invisible to other connections until COMMIT, and by then it is completed: the lease
// never governs a takeover here. It only has to outlast the transaction for complete's live-lease check.
// Nor does the claim reserve the key (no reserveMs): a rolled-back transaction leaves nothing to guard.
// A reservation left by a crashed engine claim is still honoured, by claim.sql and by the reads below.
const TRANSACTION_LEASE_MS = 3_600_000;

// Where a failure happened decides what the caller gets: the handler's own error as is, anything else as
// a store outage (nothing was committed, retry).
type Phase = 'begin' | 'claim' | 'handler' | 'complete' | 'beforeCommit' | 'commit';

// What the transaction body hands back; settled after the transaction has ended.
type BodyResult<T> =
  | { claimed: true; value: T; token: number; attempt: number; startedAt: number }
  | { claimed: false; record: IdempotencyRecord };

/**
 * Create the transactional mode on your better-sqlite3 connection. Use the same table and namespace as
 * the engine's `sqliteStore` to share records between both modes.
 * @example
 * import Database from 'better-sqlite3';
 * import { sqliteTransactional } from 'idempotency-kit/sqlite';
 *
 * const db = new Database('app.db');
 * db.pragma('journal_mode = WAL');
 * const transactional = sqliteTransactional({ database: db });
 * const insertOrder = db.prepare('INSERT INTO orders (total) VALUES (?)');
 * const outcome = await transactional.runInTransaction({ key, payload: order }, (tx) => {
 *   const { lastInsertRowid } = insertOrder.run(order.total);
 *   return { orderId: Number(lastInsertRowid) };
 * });
 */
export function sqliteTransactional(options: SqliteTransactionalOptions): SqliteTransactional {
  const db = options?.database;
  if (
    typeof db !== 'object' ||
    db === null ||
    typeof db.prepare !== 'function' ||
    typeof db.transaction !== 'function'
  ) {
    throw new InvalidOptionsError(
      'sqliteTransactional: `database` must be an open better-sqlite3 Database (the handler writes through it)',
    );
  }
  knownFields(options, 'sqliteTransactional', SQLITE_TRANSACTIONAL_FIELDS);
  const table = checkTableName(options.table ?? DEFAULT_TABLE);
  // Checked as the engine checks them: a namespace that differs in type from the engine's would share
  // nothing with it, silently; a bad codec would only fail after the handler had run, and a clock without
  // now() would be reported as a store outage on every call.
  const namespace = stringOption(options.namespace, 'namespace', 'default');
  const defaultCodecOption = codecOption(options.codec, 'codec', defaultCodec);
  const defaultRetentionMs = toMs(options.retentionMs ?? '24h', 'retentionMs');
  const hooks = callbacksOption<IdempotencyHooks>(options.hooks, 'hooks') ?? {};
  const clock = options.clock ?? systemClock;
  if (typeof clock !== 'object' || clock === null || typeof clock.now !== 'function') {
    throw new InvalidOptionsError('sqliteTransactional: `clock` must have a now() method');
  }
  const onWarning = onWarningOption(options.onWarning, 'sqliteTransactional');
  if (booleanOption(options.migrate, 'migrate', true)) {
    reportMigration(runMigrations(db, { table }), onWarning);
  }

  // Now rather than on the first run: a COMMIT or ROLLBACK the application prepares from here on refuses
  // to run inside a handler, even one prepared before that run (see transaction-guard.ts).
  guardConnection(db);

  // Prepared on first use (the same cached statements as a sqliteStore on this connection), so an
  // instance created with `migrate: false` before the schema exists works once it does.
  let statements: Statements | undefined;
  const prepared = () => {
    statements ??= prepareStatements(db, table);
    return statements;
  };

  // One wrapper for every call: better-sqlite3 runs `BEGIN IMMEDIATE`, the body, then `COMMIT`, and rolls
  // back if the body (or COMMIT) throws.
  const transaction = db.transaction((body: (s: Statements) => unknown) => body(prepared()));

  function settleExisting<T>(
    record: IdempotencyRecord,
    fingerprint: string,
    codec: OutcomeCodec,
    event: HookEvent,
  ): RunOutcome<T> {
    return settleRecord<T>(record, {
      fingerprint,
      codec,
      now: clock.now(),
      hooks,
      event,
      fromCache: false,
    });
  }

  // The record that blocks a claim with `fingerprint`: a live one, or a crashed engine claim's dead lease
  // still reserved for another fingerprint (answered as a mismatch). Judged at a time read after the read,
  // which waits for a writer's lock without WAL (see readBlockingNow).
  function readBlocker(key: string, fingerprint: string): IdempotencyRecord | undefined {
    const row = readBlockingNow(prepared(), key, fingerprint, clock);
    return row === undefined ? undefined : toRecord(row);
  }

  // The transaction ended under the handler (see transaction-guard.ts): we are in autocommit now, and the
  // run fails with the handler's error. What committed decides what is recorded, so that a retry runs the
  // handler again only if nothing did:
  // - The claim is still ours, in progress: a COMMIT committed it with the writes before it. It is completed
  //   with the run's error (replayed as ReplayedError): left in progress, the key answered in_progress for
  //   the lease's hour, then a takeover ran the handler again.
  // - Completed by us: a COMMIT in beforeCommit committed the record, with the handler's value.
  // - Gone, rolled back with the writes before the end: on a guarded connection every statement after the
  //   end was refused (and every COMMIT), so nothing committed and the key stays free, as after a throw.
  //   On one that could not be guarded, writes after the end may have committed in autocommit: the key is
  //   claimed anew, in a transaction of its own, and completed with the error (unless another attempt has
  //   claimed it since, which is what the error then says).
  function recordEnd(
    s: Statements,
    key: string,
    fingerprint: string,
    token: number,
    retentionMs: number,
  ) {
    const complete = (statements: Statements, held: number) => {
      const now = clock.now();
      const outcome = bufferView(encodeErrorOutcome(transactionEndedError('recorded')));
      const params = { key, token: held, outcome, now, expires_at: now + retentionMs };
      return statements.complete.run(params).changes === 1;
    };
    const guarded = guardsEveryStatement(db);
    try {
      if (complete(s, token)) return { error: transactionEndedError('recorded'), stored: true };
      if (s.isCompletedBy.get({ key, token, now: clock.now() }) !== undefined) {
        return { error: transactionEndedError('completed'), stored: true };
      }
      if (guarded) return { error: transactionEndedError('nothing'), stored: false };
      const recorded = transaction.immediate((fresh: Statements) => {
        const params = { fingerprint, leaseMs: TRANSACTION_LEASE_MS };
        const won = fresh.claim.get(claimParams(key, params, clock.now())) as ClaimRow | undefined;
        if (won === undefined) return false;
        fresh.bumpToken.run({ token: won.token });
        return complete(fresh, won.token);
      }) as boolean;
      return {
        error: transactionEndedError(recorded ? 'recorded' : 'unrecorded'),
        stored: recorded,
      };
    } catch {
      // The database failed (SQLITE_FULL may well be what ended the transaction): on a guarded connection
      // nothing committed all the same.
      return { error: transactionEndedError(guarded ? 'nothing' : 'unrecorded'), stored: false };
    }
  }

  function runInTransactionSync<T>(
    request: SqliteTransactionalRequest,
    fn: (tx: SqliteTransactionContext) => SyncResult<T>,
    runOptions: SqliteRunInTransactionOptions = {},
  ): RunOutcome<T> {
    validateKey(request.key);
    if (typeof fn !== 'function') {
      throw new InvalidOptionsError('runInTransaction: the handler must be a function');
    }
    const storageKey = runStorageKey(namespace, request);
    const fingerprint =
      request.fingerprint ??
      (request.payload === undefined ? '' : createFingerprint(request.payload));
    const retentionMs =
      request.retentionMs === undefined
        ? defaultRetentionMs
        : toMs(request.retentionMs, 'retentionMs');
    const codec = codecOption(request.codec, 'codec', defaultCodecOption);
    const event: HookEvent = { namespace, storageKey };

    // Nesting would make `executed` mean "will commit if your outer transaction does", and a deferred
    // outer transaction does not hold the write lock the claim relies on.
    if (db.inTransaction) {
      throw new InvalidOptionsError(
        'runInTransaction opens its own BEGIN IMMEDIATE transaction: call it while no transaction is open ' +
          'on this connection (not from inside db.transaction() nor another runInTransaction)',
      );
    }

    // An object, so that TypeScript does not narrow it across the transaction body's assignments.
    // Where the body was when it threw, and, once the handler started, what `onFailed` reports.
    const at: {
      phase: Phase;
      run?: { token: number; attempt: number; startedAt: number };
      stored?: boolean;
    } = { phase: 'claim' };
    try {
      // Fast path without the write lock, as the store's claim: a committed record (a replay, an engine
      // claim in flight, a mismatch, a crashed engine claim's key still reserved for another fingerprint)
      // is answered from a read, so replays never queue for the lock.
      const existing = readBlocker(storageKey, fingerprint);
      if (existing !== undefined) return settleExisting(existing, fingerprint, codec, event);

      at.phase = 'begin';
      const result = transaction.immediate((s: Statements): BodyResult<T> => {
        at.phase = 'claim';
        // Read the clock once the write lock is held: waiting for it must not count against the lease.
        const now = clock.now();
        const won = s.claim.get(
          claimParams(storageKey, { fingerprint, leaseMs: TRANSACTION_LEASE_MS }, now),
        ) as ClaimRow | undefined;
        if (won === undefined) {
          // Committed by another process while we waited for the lock (or a dead lease reserved for
          // another fingerprint): nothing was written, the empty transaction commits.
          const row = readBlocking(s, storageKey, fingerprint, now);
          if (row === undefined) throw new Error('claim neither won nor found a blocking record');
          return { claimed: false, record: toRecord(row) };
        }
        s.bumpToken.run({ token: won.token });
        const { token, attempt } = won;
        const context: SqliteTransactionContext = {
          database: db,
          token,
          attempt,
          storageKey,
          downstreamKey: (step) => deriveDownstreamKey(storageKey, step),
        };

        at.phase = 'handler';
        const startedAt = clock.now();
        at.run = { token, attempt, startedAt };
        // The transaction ended under the handler anyway (an error that rolled it back, OR ROLLBACK,
        // SQLITE_FULL or an I/O error, swallowed; a COMMIT on a connection that could not be guarded): we
        // would complete, and COMMIT, in autocommit mode. The handler's error, loud: not a store outage,
        // whose answer tells the client a retry will not run it twice; recorded when writes may have
        // committed (see recordEnd).
        const ended = () => {
          const { error, stored } = recordEnd(s, storageKey, fingerprint, token, retentionMs);
          at.stored = stored;
          return error;
        };
        // A COMMIT or ROLLBACK the handler runs on the connection is refused, and so is any statement after
        // an end SQLite made (see transaction-guard.ts). A handler that throws after an end fails with its
        // own error, and what committed is recorded all the same.
        const guardedCall = (body: () => unknown): unknown => {
          try {
            return guardedRun(db, body);
          } catch (error) {
            if (!db.inTransaction) ended();
            throw error;
          }
        };
        const value = guardedCall(() => fn(context));
        if (isThenable(value)) {
          // Whatever the async handler does after its first await runs outside this transaction; keep
          // its eventual rejection from crashing the process, the caller gets this error instead.
          Promise.resolve(value).catch(() => {});
          throw new InvalidOptionsError(
            'runInTransaction: the handler returned a promise. SQLite transactions cannot span an await ' +
              '(better-sqlite3 is synchronous), so the handler must be synchronous: do async work (HTTP ' +
              'calls…) before or after runInTransaction. Everything was rolled back.',
          );
        }
        if (!db.inTransaction) throw ended();
        const outcome = encodeValueOutcome(codec.encode(value));

        at.phase = 'complete';
        const completedAt = clock.now();
        const done = s.complete.run({
          key: storageKey,
          token,
          outcome: bufferView(outcome),
          now: completedAt,
          expires_at: completedAt + retentionMs,
        });
        if (done.changes !== 1) throw new Error('the record claimed in this transaction is gone');
        at.phase = 'beforeCommit';
        const { beforeCommit } = runOptions;
        if (beforeCommit !== undefined) guardedCall(() => beforeCommit(context));
        // Ended here too (as above): the handler's side of the run, not an outage at COMMIT.
        if (!db.inTransaction) throw ended();
        at.phase = 'commit';
        return { claimed: true, value: value as T, token, attempt, startedAt };
      }) as BodyResult<T>;

      if (!result.claimed) return settleExisting(result.record, fingerprint, codec, event);
      const { value, token, attempt, startedAt } = result;
      if (attempt > 1) emit(hooks, 'onTakeover', { ...event, token, attempt });
      emit(hooks, 'onExecuted', { ...event, token, attempt, durationMs: clock.now() - startedAt });
      return { status: 'executed', value, token, attempt, failedOpen: false };
    } catch (error) {
      // The wrapper has rolled back by now (everything, record included). The handler's own errors, and
      // ours, pass through unchanged. So does a deferred foreign key of the user's that fails at COMMIT:
      // the records table has none, so it is the handler's write that broke it, not a store outage to
      // retry (the same request would fail the same way, after running the handler again).
      const usersError =
        at.phase === 'handler' ||
        at.phase === 'beforeCommit' ||
        (at.phase === 'commit' && driverCode(error)?.startsWith('SQLITE_CONSTRAINT') === true);
      if (usersError || isIdempotencyError(error)) {
        if (usersError && at.run !== undefined) {
          const { token, attempt, startedAt } = at.run;
          const durationMs = clock.now() - startedAt;
          const stored = at.stored === true;
          emit(hooks, 'onFailed', { ...event, token, attempt, durationMs, stored });
        }
        throw error;
      }
      if (at.phase === 'begin' && driverCode(error) === 'SQLITE_BUSY') {
        // Locked past the busy timeout: if the holder committed this key meanwhile, answer from it.
        const committed = safeRead(storageKey, fingerprint);
        if (committed !== undefined) return settleExisting(committed, fingerprint, codec, event);
      }
      emit(hooks, 'onStoreError', { ...event, operation: `transaction ${at.phase}`, error });
      throw unavailable(`transaction ${at.phase}`, error);
    }
  }

  function safeRead(key: string, fingerprint: string): IdempotencyRecord | undefined {
    try {
      return readBlocker(key, fingerprint);
    } catch {
      return undefined;
    }
  }

  return {
    synchronousHandlers: true,
    database: db,
    table,
    runInTransactionSync,
    async runInTransaction(request, fn, runOptions) {
      return runInTransactionSync(request, fn, runOptions);
    },
    storageKeyFor: (key, scope = '', keyOptions) =>
      lookupKey(namespace, key, scope, keyOptions, 'storageKeyFor'),
  };
}
