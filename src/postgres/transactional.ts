/**
 * Transactional mode: the key is claimed inside the caller's transaction, on the same connection the
 * handler writes through, and the record is completed in that transaction before COMMIT. The record, the
 * business rows and any outbox rows therefore commit together or not at all: a crash at any point before
 * COMMIT leaves nothing, and a retry executes once.
 *
 * A concurrent duplicate's INSERT waits on the unique index until the first transaction ends, then replays
 * its outcome (or claims the key, if the first rolled back). With `lockTimeoutMs` it answers `in_progress`
 * instead. Under REPEATABLE READ and SERIALIZABLE, serialization failures (40001) and deadlocks (40P01)
 * retry the whole transaction a bounded number of times.
 * @module
 */
import { type Duration, toMs } from '../core/duration.js';
import type { RunOutcome, RunRequest } from '../core/engine.js';
import { InvalidOptionsError, isLeaseLostError, LeaseLostError } from '../core/errors.js';
import { createFingerprint } from '../core/fingerprint.js';
import { emit, type HookEvent, type IdempotencyHooks, ignoreRejection } from '../core/hooks.js';
import { deriveDownstreamKey, validateKey } from '../core/key.js';
import { lookupKey, type StorageKeyOptions } from '../core/lookup-key.js';
import {
  callbacksOption,
  codecOption,
  knownFields,
  shownValue,
  stringOption,
} from '../core/option-checks.js';
import { defaultCodec, encodeValueOutcome, type OutcomeCodec } from '../core/outcome.js';
import { type IdempotencyRecord, RecordStatus } from '../core/record.js';
import { runStorageKey } from '../core/reserved-scopes.js';
import { settleRecord } from '../core/settle.js';
import { isThenable } from '../core/thenable.js';
import { checkOutGuarded } from './check-out.js';
import {
  isDriverReadTimeout,
  isNodePostgres,
  isPool,
  isRetryableTransactionError,
  type PgPool,
  type PgPoolClient,
  type PgQueryable,
  type PgQueryResult,
  SqlState,
  sqlState,
  toStoreError,
} from './client.js';
import { isKeyHeld, isLockTimeout } from './held-key.js';
import { DEFAULT_SCHEMA, DEFAULT_TABLE, tableNames } from './identifiers.js';
import { refuseNativeClient } from './native-client.js';
import { createOperations } from './operations.js';
import { isTransactionControl, watchTransactionStatus } from './transaction-control.js';
import { recordEnd, statementAfterEndError } from './transaction-end.js';

/** Isolation levels a transactional run may use. */
export const IsolationLevel = {
  ReadCommitted: 'read committed',
  RepeatableRead: 'repeatable read',
  Serializable: 'serializable',
} as const;

/** One of the {@link IsolationLevel} values. */
export type IsolationLevel = (typeof IsolationLevel)[keyof typeof IsolationLevel];

/** Options of {@link postgresTransactional}. */
export interface PostgresTransactionalOptions {
  /** A node-postgres `Pool` (or anything whose `connect()` hands out a dedicated connection). */
  pool: PgPool;
  /** Schema of the records table. @default 'public' */
  schema?: string;
  /** Name of the records table. @default 'idempotency_records' */
  table?: string;
  /** Named prepared statements, as in `postgresStore`. @default 'auto' */
  prepare?: boolean | 'auto';
  /** Must equal the engine's `namespace` for records to be shared with `createIdempotency().run`. @default 'default' */
  namespace?: string;
  /** How long a completed outcome is replayed. @default '24h' */
  retentionMs?: Duration;
  /** Encodes outcomes for storage (same envelope as the engine). @default defaultCodec */
  codec?: OutcomeCodec;
  /** Isolation level of every transaction. @default 'read committed' */
  isolationLevel?: IsolationLevel;
  /** Extra attempts after a serialization failure (40001) or deadlock (40P01). @default 3 */
  maxRetries?: number;
  /**
   * How long a concurrent duplicate waits for the first transaction before answering `in_progress`
   * (PostgreSQL `lock_timeout`). `0` answers at once (NOWAIT). `undefined` waits until the first
   * transaction ends, then replays its outcome. @default undefined
   */
  lockTimeoutMs?: number;
  /** The `retryAfterMs` reported when a duplicate gives up waiting. @default 1000 */
  busyRetryAfterMs?: number;
  /** Observation callbacks (the engine's hook set). */
  hooks?: IdempotencyHooks;
  /** Called before a transaction is retried after a serialization failure or deadlock. */
  onRetry?(event: { attempt: number; error: unknown }): void;
}

// Every key of PostgresTransactionalOptions, checked by the compiler both ways: a misspelt option
// (`lockTimeout`) is refused instead of leaving its default in force.
const POSTGRES_TRANSACTIONAL_FIELDS = Object.keys({
  pool: true,
  schema: true,
  table: true,
  prepare: true,
  namespace: true,
  retentionMs: true,
  codec: true,
  isolationLevel: true,
  maxRetries: true,
  lockTimeoutMs: true,
  busyRetryAfterMs: true,
  hooks: true,
  onRetry: true,
} as const satisfies Record<keyof PostgresTransactionalOptions, true>);

/** A request to run in a transaction: the engine's request without lease or fail-open settings. */
export type TransactionalRequest = Pick<
  RunRequest,
  'key' | 'scope' | 'fingerprint' | 'payload' | 'retentionMs' | 'codec'
> & {
  /** Overrides the option of the same name for this call. */
  lockTimeoutMs?: number;
  /** Overrides the option of the same name for this call. */
  isolationLevel?: IsolationLevel;
};

/**
 * What the handler is given: a queryable bound to the transaction (write your rows through it, and pass it
 * to anything else that must commit with them, such as an outbox), plus the claim's details.
 */
export interface TransactionContext extends PgQueryable {
  /**
   * Run a statement in the transaction. `R` types the rows: `tx.query<{ id: number }>('INSERT … RETURNING id')`.
   */
  query<R = Record<string, unknown>>(
    text: string,
    values?: unknown[],
  ): Promise<PgQueryResult & { rows: R[] }>;
  /**
   * The transaction's own connection. Never COMMIT, ROLLBACK or release it yourself (`release()` throws).
   * Like `query`, its `query` refuses to run once the transaction has ended.
   */
  readonly client: PgPoolClient;
  /** Fencing token of this execution. */
  readonly token: number;
  /** Record attempt: 1, or more after takeovers of crashed non-transactional attempts. */
  readonly attempt: number;
  /** 1 for the first transaction, more after serialization retries (the handler runs again then). */
  readonly transactionAttempt: number;
  /** The storage key (hashed). */
  readonly storageKey: string;
  /** The isolation level in force. */
  readonly isolationLevel: IsolationLevel;
  /** A stable key for a downstream provider's own deduplication, the same on every attempt. */
  downstreamKey(step: string): string;
}

/** Runs handlers with their idempotency record in the same transaction. */
export interface PostgresTransactional {
  /**
   * Run `fn` at most once per (scope, key) while its outcome is retained, with the record committed in
   * the same transaction as `fn`'s writes through `tx`.
   *
   * Rejects with `InvalidKeyError`, `StoreUnavailableError` (database unreachable, or serialization
   * failures beyond `maxRetries`), `ReplayedError`, or `fn`'s own error after rolling everything back;
   * `InvalidOptionsError` when `fn` tried to end the transaction through `tx`, or ended it in a form the
   * guard could not read: then what may have committed is recorded with that error (a retry gets it back
   * as `ReplayedError`).
   */
  runInTransaction<T>(
    request: TransactionalRequest,
    fn: (tx: TransactionContext) => Promise<T> | T,
    options?: { beforeCommit?: (tx: TransactionContext) => Promise<void> | void },
  ): Promise<RunOutcome<T>>;
  /**
   * The storage key `runInTransaction` uses for (scope, key). For a transactional HTTP route's request,
   * pass `{ http: true }`: a scope it got that starts `consumer:`, `handed-back:` or `dead-letter:` is
   * keyed apart from those components' records (as the engine's `storageKeyFor`).
   */
  storageKeyFor(key: string, scope?: string, options?: StorageKeyOptions): string;
}

// The record is invisible to others until COMMIT, and by then it is completed: the lease never governs
// a takeover here. It only has to outlast the transaction for complete's live-lease check (now() is the
// transaction's start time).
const TRANSACTION_LEASE_MS = 3_600_000;
const RETRY_BACKOFF_MS = 20;

// The column the BEGIN round trip of a run with `lockTimeoutMs` reads the session's lock_timeout into.
const PREVIOUS_LOCK_TIMEOUT = 'ik_previous_lock_timeout';

/**
 * The session's lock_timeout read by the BEGIN round trip: node-postgres answers a multi-statement query
 * with one result per statement, other drivers with the last one. `undefined` when not found.
 */
function previousLockTimeout(began: unknown): string | undefined {
  const results = Array.isArray(began) ? began : [began];
  const row = (results.at(-1) as PgQueryResult | undefined)?.rows?.[0] as
    | Record<string, unknown>
    | undefined;
  const value = row?.[PREVIOUS_LOCK_TIMEOUT];
  return typeof value === 'string' ? value : undefined;
}

class RetryableTransaction extends Error {
  /**
   * @param original - The serialization failure or deadlock.
   * @param phase - Where it happened: the `transaction <phase>` a run that gives up reports to `onStoreError`.
   */
  constructor(
    readonly original: unknown,
    readonly phase: string,
  ) {
    super('retryable transaction failure');
  }
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * Whether `record` answers a claim with `in_progress` (the same request's live lease), the one answer whose
 * `retryAfterMs` depends on the clock (a mismatch is checked first, as `settleRecord` does).
 */
function holdsLiveLease(record: IdempotencyRecord, fingerprint: string): boolean {
  return record.status === RecordStatus.InProgress && record.fingerprint === fingerprint;
}

/**
 * The database's clock now (epoch ms), the clock a record's lease end is on. `clock_timestamp()`, not the
 * transaction's `now()`: the claim may have waited for the row, and the wait is behind the caller already.
 */
async function databaseNow(client: PgQueryable): Promise<number> {
  const { rows } = await client.query(
    "SELECT floor(date_part('epoch', clock_timestamp()) * 1000) AS now_ms",
  );
  const now = Number((rows[0] as { now_ms: unknown } | undefined)?.now_ms);
  return Number.isFinite(now) ? now : Date.now();
}

/**
 * True for an error COMMIT raises from the user's own rules: a deferred constraint (class 23: unique,
 * foreign key, exclusion) or a deferred constraint trigger's RAISE (class P0). The records table has no
 * deferred constraint, so such an error is the handler's, like one its statements raise: rethrown as is,
 * not a store outage that invites the client to send the same doomed request again.
 */
function isDeferredCheckFailure(error: unknown): boolean {
  const state = sqlState(error);
  return state !== undefined && (state.startsWith('23') || state.startsWith('P0'));
}

/**
 * What `tx` and the run share: whether the transaction is still open (false from the moment COMMIT or
 * ROLLBACK is sent), whether it ended under the handler, and a statement of the handler's that the driver
 * gave up waiting for.
 */
interface TransactionState {
  open: boolean;
  /**
   * Whether the connection was seen out of its transaction while the handler ran (see {@link seenEnded}):
   * from then on `tx` sends nothing, and the run records what may have committed (`transaction-end.ts`).
   */
  ended: boolean;
  /** Whether the server's last answer said the connection is idle (`watchTransactionStatus`). */
  idle: () => boolean;
  /**
   * The error of a statement sent through `tx` that the driver stopped waiting for (node-postgres's
   * `query_timeout`) while the server may still be running it. The connection is then of no further use:
   * a ROLLBACK would queue behind that statement and wait a whole timeout more, and a COMMIT could commit
   * a write the handler was told had failed.
   */
  unanswered?: unknown;
}

/**
 * Whether the transaction has ended under the handler: a COMMIT or ROLLBACK the guard could not read (a
 * submittable without a text, a scanner hole) went through `tx`. Read as each statement through `tx`
 * settles and before the next is sent (a field read), and kept: a hidden `BEGIN` after the end would make
 * the status look right again, with the claim gone.
 */
function seenEnded(state: TransactionState): boolean {
  if (!state.ended && state.idle()) state.ended = true;
  return state.ended;
}

/** Remember `error` on `state` if the driver gave up waiting for the statement's answer. */
function noteUnanswered(state: TransactionState, error: unknown): void {
  if (state.unanswered === undefined && isDriverReadTimeout(error)) state.unanswered = error;
}

function endedError(): InvalidOptionsError {
  return new InvalidOptionsError(
    'runInTransaction: a statement was sent through `tx` after its transaction ended (a query the handler ' +
      'did not await?). It was not run: the connection is back in the pool and may be serving another ' +
      'transaction.',
  );
}

function transactionControlError(): InvalidOptionsError {
  return new InvalidOptionsError(
    'runInTransaction: the handler sent a statement that ends the transaction (BEGIN, COMMIT, ROLLBACK, END, ' +
      'ABORT, PREPARE TRANSACTION), alone or among other statements, through `tx`. None of the text ' +
      'was run: the record commits with your writes when the handler returns, and a throw rolls both ' +
      'back. Use SAVEPOINT / ROLLBACK TO SAVEPOINT inside it.',
  );
}

/**
 * `client.query`, refused once the transaction has ended. A handler that leaves a statement for later (a
 * timer, a branch of `Promise.all` still running after another rejected) would otherwise send it on a
 * connection that is back in the pool: in autocommit, committing a business write with no record, or
 * inside another request's transaction. A text with a statement that would end the transaction itself
 * (COMMIT, ROLLBACK, BEGIN…, first or later among several: `isTransactionControl`) is refused too, before
 * any of it is sent; and so is every statement once the transaction has ended under the handler anyway
 * ({@link seenEnded}): in autocommit, it would commit with no record.
 */
function guardedQuery(client: PgPoolClient, state: TransactionState) {
  return function query(this: unknown, ...args: unknown[]): unknown {
    // A COMMIT would commit the claim with part of the writes, a ROLLBACK drop it and leave the writes
    // after it to autocommit, with no record: the retry ran the handler again.
    const control = isTransactionControl(args[0]);
    if (state.open && !control && !seenEnded(state)) return watchedQuery(client, state, args);
    const error = control
      ? transactionControlError()
      : state.open
        ? statementAfterEndError()
        : endedError();
    const last = args.at(-1);
    if (typeof last === 'function') {
      // node-postgres's callback style: answer through the callback, as the driver would.
      queueMicrotask(() => (last as (e: Error) => void)(error));
      return undefined;
    }
    const config = args[0] as { submit?: unknown } | null | undefined;
    // A submittable (a cursor, a stream) is returned by the driver, not a promise: fail where it is sent.
    if (typeof config === 'object' && config !== null && typeof config.submit === 'function') {
      throw error;
    }
    return Promise.reject(error);
  };
}

/**
 * `client.query(...args)`, watched for a statement the driver gives up waiting for (see
 * {@link TransactionState.unanswered}) and for the end of the transaction ({@link seenEnded}): through
 * the promise it returns, or the callback it is given. A submittable (a cursor) is passed as is: the next
 * statement's send sees an end it made.
 */
function watchedQuery(client: PgPoolClient, state: TransactionState, args: unknown[]): unknown {
  const send = client.query as (...a: unknown[]) => unknown;
  const last = args.at(-1);
  if (typeof last === 'function') {
    const callback = last as (error: unknown, ...rest: unknown[]) => unknown;
    const watched = (error: unknown, ...rest: unknown[]) => {
      if (error) noteUnanswered(state, error);
      seenEnded(state);
      return callback(error, ...rest);
    };
    return send.apply(client, [...args.slice(0, -1), watched]);
  }
  const result = send.apply(client, args);
  if (!isThenable(result)) return result;
  // Noted before the handler's own `await` sees the answer: it may catch a rejection and go on. (A
  // rejection may come before the server's ReadyForQuery, whose status the next send then reads.)
  return Promise.resolve(result).then(
    (value: unknown) => {
      seenEnded(state);
      return value;
    },
    (error: unknown) => {
      noteUnanswered(state, error);
      seenEnded(state);
      throw error;
    },
  );
}

/**
 * The connection as the handler sees it: the same client (everything passes through to it), except that
 * `query` refuses to run after the transaction ended and `release` always throws (releasing is ours).
 */
function guardedClient(client: PgPoolClient, state: TransactionState): PgPoolClient {
  const query = guardedQuery(client, state);
  const release = () => {
    throw new InvalidOptionsError(
      'runInTransaction: never release `tx.client` yourself; it is released when the transaction ends',
    );
  };
  return new Proxy(client, {
    get(target, property, receiver) {
      if (property === 'query') return query;
      if (property === 'release') return release;
      return Reflect.get(target, property, receiver);
    },
  });
}

function checkBusyRetryAfter(value: number | undefined): number {
  if (value === undefined) return 1000;
  // It becomes a Retry-After header: NaN, a negative or a fraction would be sent as nonsense.
  if (!Number.isSafeInteger(value) || value < 0) {
    throw new InvalidOptionsError(
      `busyRetryAfterMs must be a non-negative integer of ms, got ${shownValue(value)}`,
    );
  }
  return value;
}

function checkPrepare(value: unknown): boolean | 'auto' {
  if (value === undefined) return 'auto';
  // Anything else would silently mean `false` (plain text), whatever was meant.
  if (value !== true && value !== false && value !== 'auto') {
    throw new InvalidOptionsError(
      `prepare must be true, false or 'auto', got ${shownValue(value)}`,
    );
  }
  return value;
}

function checkLockTimeout(value: number | undefined): number | undefined {
  if (value !== undefined && (!Number.isFinite(value) || value < 0)) {
    throw new InvalidOptionsError(
      `lockTimeoutMs must be a non-negative number, got ${shownValue(value)}`,
    );
  }
  return value;
}

function checkIsolation(value: string): IsolationLevel {
  if (!Object.values(IsolationLevel).includes(value as IsolationLevel)) {
    throw new InvalidOptionsError(
      `isolationLevel must be one of ${Object.values(IsolationLevel).join(', ')}, got ${shownValue(value)}`,
    );
  }
  return value as IsolationLevel;
}

/**
 * Create the transactional mode over a pool. Use the same schema, table and namespace as the engine's
 * store to share records between both modes.
 * @example
 * const transactional = postgresTransactional({ pool });
 * const outcome = await transactional.runInTransaction({ key, payload: order }, async (tx) => {
 *   const { rows } = await tx.query<{ id: number }>('INSERT INTO orders (total) VALUES ($1) RETURNING id', [order.total]);
 *   return { orderId: rows[0].id };
 * });
 */
export function postgresTransactional(
  options: PostgresTransactionalOptions,
): PostgresTransactional {
  const pool = options?.pool;
  if (pool === undefined || pool === null || typeof pool.connect !== 'function') {
    throw new InvalidOptionsError(
      'postgresTransactional: `pool` must have a connect() method (a pg Pool)',
    );
  }
  // Its completions would store outcomes cut at their first zero byte (see native-client.ts).
  refuseNativeClient(pool, 'postgresTransactional');
  // A node-postgres Client has connect() too, but it opens the client itself, once: every run then failed
  // as an outage ("Client has already been connected", a 503 to retry forever) or with a TypeError.
  if (isNodePostgres(pool) && !isPool(pool)) {
    throw new InvalidOptionsError(
      'postgresTransactional: `pool` is a pg Client; pass a pg Pool, which hands each transaction a ' +
        'connection of its own (a Client is one connection, and may be used by postgresStore or migrate)',
    );
  }
  knownFields(options, 'postgresTransactional', POSTGRES_TRANSACTIONAL_FIELDS);
  const ops = createOperations(
    tableNames(options.schema ?? DEFAULT_SCHEMA, options.table ?? DEFAULT_TABLE),
    { prepare: checkPrepare(options.prepare) },
  );
  // Checked as the engine checks them: a namespace that differs in type from the engine's would share
  // nothing with it, silently, and a bad codec would only fail after the handler had run (its calls to
  // other systems made), on every retry.
  const namespace = stringOption(options.namespace, 'namespace', 'default');
  const defaultCodecOption = codecOption(options.codec, 'codec', defaultCodec);
  const defaultRetentionMs = toMs(options.retentionMs ?? '24h', 'retentionMs');
  const defaultIsolation = checkIsolation(options.isolationLevel ?? IsolationLevel.ReadCommitted);
  const defaultLockTimeout = checkLockTimeout(options.lockTimeoutMs);
  const maxRetries = options.maxRetries ?? 3;
  if (!Number.isSafeInteger(maxRetries) || maxRetries < 0) {
    throw new InvalidOptionsError(
      `maxRetries must be a non-negative integer, got ${shownValue(maxRetries)}`,
    );
  }
  const busyRetryAfterMs = checkBusyRetryAfter(options.busyRetryAfterMs);
  if (options.onRetry !== undefined && typeof options.onRetry !== 'function') {
    throw new InvalidOptionsError('onRetry must be a function');
  }
  const hooks = callbacksOption<IdempotencyHooks>(options.hooks, 'hooks') ?? {};

  function settleExisting<T>(
    record: IdempotencyRecord,
    fingerprint: string,
    codec: OutcomeCodec,
    event: HookEvent,
    now: number,
  ): RunOutcome<T> {
    return settleRecord<T>(record, {
      fingerprint,
      codec,
      now,
      hooks,
      event,
      fromCache: false,
    });
  }

  async function runInTransaction<T>(
    request: TransactionalRequest,
    fn: (tx: TransactionContext) => Promise<T> | T,
    runOptions: { beforeCommit?: (tx: TransactionContext) => Promise<void> | void } = {},
  ): Promise<RunOutcome<T>> {
    validateKey(request.key);
    const storageKey = runStorageKey(namespace, request);
    const fingerprint =
      request.fingerprint ??
      (request.payload === undefined ? '' : createFingerprint(request.payload));
    const retentionMs =
      request.retentionMs === undefined
        ? defaultRetentionMs
        : toMs(request.retentionMs, 'retentionMs');
    const codec = codecOption(request.codec, 'codec', defaultCodecOption);
    const isolationLevel = checkIsolation(request.isolationLevel ?? defaultIsolation);
    const lockTimeoutMs = checkLockTimeout(request.lockTimeoutMs ?? defaultLockTimeout);
    const event: HookEvent = { namespace, storageKey };
    // lock_timeout = 0 would mean "no timeout" to PostgreSQL; 1 ms is as close to NOWAIT as it gets. The
    // session's own value is read in the same round trip, to be put back for the handler's statements.
    const begin =
      lockTimeoutMs === undefined
        ? `BEGIN ISOLATION LEVEL ${isolationLevel.toUpperCase()}`
        : `BEGIN ISOLATION LEVEL ${isolationLevel.toUpperCase()}; SELECT current_setting('lock_timeout') AS ${PREVIOUS_LOCK_TIMEOUT}, set_config('lock_timeout', '${Math.max(1, Math.ceil(lockTimeoutMs))}', true)`;

    async function once(
      client: PgPoolClient,
      transactionAttempt: number,
      connection: { broken: boolean },
    ): Promise<RunOutcome<T>> {
      let phase: 'begin' | 'claim' | 'settle' | 'handler' | 'complete' | 'beforeCommit' | 'commit' =
        'begin';
      // Set once the handler starts: what `onFailed` reports if it throws.
      let handlerRun: { token: number; attempt: number; startedAt: number } | undefined;
      // What `tx` checks before sending anything: closed as COMMIT or ROLLBACK is sent, ended once the
      // connection is seen idle under the handler.
      const watch = watchTransactionStatus(client);
      const state: TransactionState = { open: true, ended: false, idle: watch.idle };
      // What was recorded for a transaction that ended under the handler (see transaction-end.ts), once.
      let end: ReturnType<typeof recordEnd> | undefined;
      const recordEnded = () => {
        const run = handlerRun as { token: number };
        end ??= recordEnd(ops, client, {
          storageKey,
          fingerprint,
          token: run.token,
          leaseMs: TRANSACTION_LEASE_MS,
          retentionMs,
        });
        return end;
      };
      const txQuery = guardedQuery(client, state) as (
        text: string,
        values?: unknown[],
      ) => Promise<PgQueryResult>;
      try {
        const began: unknown = await client.query(begin);
        phase = 'claim';
        let claim: Awaited<ReturnType<typeof ops.claim>>;
        try {
          // claim.sql, not the store's claim-bounded.sql: that one's transaction-local 100 ms lock_timeout
          // would override `lockTimeoutMs` and last into the handler's statements.
          claim = await ops.claim(client, storageKey, {
            fingerprint,
            leaseMs: TRANSACTION_LEASE_MS,
          });
        } catch (error) {
          if (!isLockTimeout(error)) throw error;
          // Another transaction holds the key and we were told not to wait for it; or a lock on the table
          // (an ALTER TABLE, a LOCK TABLE…) holds up every key: an outage, as when the database cannot be
          // reached (rethrown: the catch's own ROLLBACK then finds no transaction, which PostgreSQL only
          // warns about). The aborted transaction can read nothing: this connection looks once it has ended it,
          // rather than the pool, whose every connection this run may be waiting for.
          await client.query('ROLLBACK');
          if (!(await isKeyHeld(error, client, ops.names))) throw error;
          emit(hooks, 'onConflict', { ...event, retryAfterMs: busyRetryAfterMs });
          return { status: 'in_progress', retryAfterMs: busyRetryAfterMs };
        }
        if (!claim.claimed) {
          await client.query('ROLLBACK');
          // A live lease (an engine run holds the key) ends on the database's clock: what is left of it is
          // measured on that clock too, so that this process's clock, however far off, cannot stretch the
          // caller's wait (an hour's skew told a 30 s lease's duplicate to come back in an hour). One more
          // round trip, on this path only, once the ROLLBACK has let go of the key's row.
          const now = holdsLiveLease(claim.record, fingerprint)
            ? await databaseNow(client)
            : Date.now();
          // Ended: a replayed error thrown from here is the caller's outcome, not a store failure.
          phase = 'settle';
          return settleExisting<T>(claim.record, fingerprint, codec, event, now);
        }
        // The short lock timeout was for the claim only; the handler's own statements wait as the session
        // says (its own SET, not the server default that `SET LOCAL … TO DEFAULT` would give).
        if (lockTimeoutMs !== undefined) {
          const previous = previousLockTimeout(began);
          await (previous === undefined
            ? client.query('SET LOCAL lock_timeout TO DEFAULT')
            : client.query("SELECT set_config('lock_timeout', $1, true)", [previous]));
        }

        const { token, attempt } = claim;
        const startedAt = Date.now();
        const context: TransactionContext = {
          client: guardedClient(client, state),
          token,
          attempt,
          transactionAttempt,
          storageKey,
          isolationLevel,
          query: ((text: string, values?: unknown[]) =>
            txQuery(text, values)) as TransactionContext['query'],
          downstreamKey: (step) => deriveDownstreamKey(storageKey, step),
        };
        phase = 'handler';
        handlerRun = { token, attempt, startedAt };
        const value = await fn(context);
        // The handler caught a statement's timeout and went on: that statement may yet succeed on the
        // server, so nothing of this transaction may commit (as a failed statement's aborts it).
        if (state.unanswered !== undefined) throw state.unanswered;
        // A COMMIT or ROLLBACK the guard could not see (a submittable without a text): the completion
        // would run in autocommit, apart from the writes. The handler's error, loud, and recorded as the
        // key's outcome where writes may have committed (see transaction-end.ts).
        if (seenEnded(state)) throw (await recordEnded()).error;
        const outcome = encodeValueOutcome(codec.encode(value));
        phase = 'complete';
        // Also the canary for a handler that swallowed a statement error: the aborted transaction makes
        // this statement fail (25P02) instead of letting COMMIT silently roll back.
        if (!(await ops.complete(client, storageKey, token, outcome, retentionMs))) {
          throw new LeaseLostError(token);
        }
        phase = 'beforeCommit';
        await runOptions.beforeCommit?.(context);
        if (state.unanswered !== undefined) throw state.unanswered;
        // A ROLLBACK here would have our COMMIT report success for a transaction that wrote nothing.
        if (seenEnded(state)) throw (await recordEnded()).error;
        phase = 'commit';
        state.open = false;
        const committed: PgQueryResult = await client.query('COMMIT');
        if (committed.command !== undefined && committed.command !== 'COMMIT') {
          throw new Error(`COMMIT answered ${committed.command}: the transaction had failed`);
        }
        if (attempt > 1) emit(hooks, 'onTakeover', { ...event, token, attempt });
        emit(hooks, 'onExecuted', { ...event, token, attempt, durationMs: Date.now() - startedAt });
        return { status: 'executed', value, token, attempt, failedOpen: false };
      } catch (error) {
        // The handler (or beforeCommit) threw after its transaction ended under it: its error, rethrown
        // as is, once what may have committed is recorded (nothing to roll back, and no retry: the
        // connection has been in autocommit).
        const ended =
          (phase === 'handler' || phase === 'beforeCommit') &&
          state.unanswered === undefined &&
          seenEnded(state);
        state.open = false;
        if (phase === 'settle') throw error;
        let stored = false;
        if (ended) {
          const recorded = await recordEnded();
          stored = recorded.stored;
          if (recorded.broken) connection.broken = true;
        } else if (phase === 'commit') {
          // COMMIT failing with a SQLSTATE ended the transaction; without one, the connection is gone.
          if (sqlState(error) === undefined) connection.broken = true;
        } else if (lostItsConnection(phase, error) || state.unanswered !== undefined) {
          // One of our own statements failed without a SQLSTATE (the connection died, or the driver gave up
          // waiting: query_timeout, a blackholed server), or one of the handler's timed out in the driver.
          // A ROLLBACK would queue behind the unanswered statement and wait a whole timeout more;
          // discarding the connection ends the transaction too, and nothing was committed: the caller
          // gets StoreUnavailableError, as for any other outage, after one timeout.
          connection.broken = true;
        } else {
          await client.query('ROLLBACK').catch(() => {
            connection.broken = true;
          });
        }
        if (!ended && isRetryableTransactionError(error)) {
          throw new RetryableTransaction(error, phase);
        }
        // The handler's own error (or beforeCommit's: the user's code too, a veto) is rethrown as is,
        // unless the connection died under it: then nothing was committed and the caller should retry,
        // exactly as for any other store outage.
        // So is a deferred constraint of the user's failing at COMMIT (the transaction rolled back).
        const usersError =
          ended ||
          ((phase === 'handler' || phase === 'beforeCommit') && !connection.broken) ||
          (phase === 'commit' && isDeferredCheckFailure(error));
        if (usersError && handlerRun !== undefined) {
          const { token, attempt, startedAt } = handlerRun;
          const durationMs = Date.now() - startedAt;
          emit(hooks, 'onFailed', { ...event, token, attempt, durationMs, stored });
        }
        if (usersError || isLeaseLostError(error)) throw error;
        if (phase === 'complete' && sqlState(error) === SqlState.InFailedTransaction) throw error;
        emit(hooks, 'onStoreError', { ...event, operation: `transaction ${phase}`, error });
        throw toStoreError(`transaction ${phase}`, error);
      } finally {
        watch.stop();
      }
    }

    for (let transactionAttempt = 1; ; transactionAttempt++) {
      const connection = { broken: false };
      let client: PgPoolClient;
      let unguard: () => void;
      try {
        ({ client, unguard } = await checkOutGuarded(pool, () => {
          connection.broken = true;
        }));
      } catch (error) {
        emit(hooks, 'onStoreError', { ...event, operation: 'connect', error });
        throw toStoreError('connect', error);
      }
      try {
        // A pool that only wraps a native one is known by the connection it hands out: refused before
        // BEGIN, nothing claimed (the connection goes back to its pool).
        refuseNativeClient(client, 'runInTransaction');
        return await once(client, transactionAttempt, connection);
      } catch (error) {
        if (!(error instanceof RetryableTransaction)) throw error;
        if (transactionAttempt > maxRetries) {
          // Answered as a store outage (HTTP 503), so reported as one, once: without it the run ended in
          // no event at all, and store-error dashboards and alerts never saw these 503s. Not for each
          // retried attempt: `onRetry` observes those, and a retry that succeeds is no error of the store.
          emit(hooks, 'onStoreError', {
            ...event,
            operation: `transaction ${error.phase}`,
            error: error.original,
          });
          throw toStoreError(
            `transaction (gave up after ${transactionAttempt} attempts)`,
            error.original,
          );
        }
        try {
          ignoreRejection(
            options.onRetry?.({ attempt: transactionAttempt, error: error.original }),
          );
        } catch {
          // An observer: it must not turn a retry into a failure.
        }
        await sleep(RETRY_BACKOFF_MS * transactionAttempt * Math.random());
      } finally {
        unguard();
        // A connection whose ROLLBACK failed, or that broke, is discarded instead of reused.
        client.release(
          connection.broken ? new Error('connection broken during a transaction') : undefined,
        );
      }
    }
  }

  return {
    runInTransaction,
    storageKeyFor: (key, scope = '', keyOptions) =>
      lookupKey(namespace, key, scope, keyOptions, 'storageKeyFor'),
  };
}

/**
 * Whether a statement of the transactional mode itself (not the handler's) failed for want of a
 * connection: an error without a SQLSTATE, other than the fencing answer (`LeaseLostError`), which leaves
 * the connection sound.
 */
function lostItsConnection(phase: string, error: unknown): boolean {
  return (
    (phase === 'begin' || phase === 'claim' || phase === 'complete') &&
    sqlState(error) === undefined &&
    !isLeaseLostError(error)
  );
}
