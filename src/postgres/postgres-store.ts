/**
 * `postgresStore()`: the store contract over PostgreSQL. Each transition is one SQL statement judged by the
 * database clock (`now()`); tokens come from a sequence, so they strictly increase for a key over its whole
 * history. Every driver error becomes a `StoreUnavailableError` (fail closed) with the error as `cause`;
 * node-postgres's pool discards the broken connection, so the next call recovers on its own.
 *
 * Recorded steps (`saveStep`, `loadSteps`) live in the record's row, in the `steps` column (migration
 * 0005): a jsonb object of base64 values that the claim statements keep for the same request's takeover
 * only and the completion clears.
 * @module
 */
import type { Duration } from '../core/duration.js';
import { InvalidOptionsError } from '../core/errors.js';
import { durationOption, knownFields, shownValue } from '../core/option-checks.js';
import { assertStepName } from '../core/steps.js';
import { checkListCrashedOptions, keyOrderedPage } from '../store/crashed-paging.js';
import {
  assertBatchDurations,
  assertClaimDurations,
  assertPositiveMs,
} from '../store/durations.js';
import type {
  CrashedRecordsPage,
  ListCrashedOptions,
  PurgeOptions,
  RecordInspection,
  Store,
} from '../store/store.js';
import { claimMany, completeAndClaimMany, completeMany } from './batch.js';
import { withBoundedLockWait } from './bounded-lock-wait.js';
import { type PgQueryable, toStoreError } from './client.js';
import { claimUnlessHeld, DEFAULT_BUSY_RETRY_AFTER_MS } from './held-key.js';
import { DEFAULT_SCHEMA, DEFAULT_TABLE, tableNames } from './identifiers.js';
import { refuseNativeClient } from './native-client.js';
import { createOperations } from './operations.js';

/** Options of {@link postgresStore}. */
export interface PostgresStoreOptions {
  /**
   * A node-postgres `Pool` (recommended), or any client with `query(text, params)` resolving to
   * `{ rows, rowCount }`. The store never connects or closes it: that stays with you. Each statement must
   * run as a transaction of its own (autocommit), never inside one of yours: on a schema without
   * migration 0008 a claim sent alone sets a 100 ms `lock_timeout` local to the transaction it runs in
   * (`claim-bounded.sql`), and the store's first call of a function 0008 adds finds it missing, which would
   * abort your transaction. For a record that commits with your writes, use `postgresTransactional`.
   */
  pool: PgQueryable;
  /** Schema of the records table, as created by `migrate()`. @default 'public' */
  schema?: string;
  /** Name of the records table, as created by `migrate()`. @default 'idempotency_records' */
  table?: string;
  /**
   * Send the store's statements as named prepared statements, so PostgreSQL plans each once per
   * connection (about twice the throughput of re-planning the claim statement on every call). `'auto'`
   * prepares on node-postgres clients only; set `false` behind a transaction-mode pooler (PgBouncer before
   * 1.21) that cannot keep prepared statements. @default 'auto'
   */
  prepare?: boolean | 'auto';
  /**
   * The `retryAfterMs` of the `in_progress` answer a claim gets for a key whose row another transaction
   * holds (a `postgresTransactional` run on the same table, before its COMMIT), once it has waited 100 ms
   * for it: the lock timeout of a claim sent alone (migration 0008, or `claim-bounded.sql`), and of a
   * batch's (migration 0006, the batch's other keys are then claimed as usual). A lock timeout on the
   * table itself (an `ALTER TABLE`, a `LOCK TABLE`) is not this answer but `StoreUnavailableError`.
   * In ms, or a duration string such as `'1s'`.
   * @default 1000
   */
  busyRetryAfterMs?: Duration;
}

/** A {@link Store} backed by PostgreSQL. */
export interface PostgresStore extends Store {
  /** The record as an operator sees it, a reserved dead lease included (see {@link Store.inspect}). */
  inspect(key: string): Promise<RecordInspection | undefined>;
  /** One page of the crashed claims, in byte order of their keys (see {@link Store.listCrashed}). */
  listCrashed(options: ListCrashedOptions): Promise<CrashedRecordsPage>;
  /** The client the store runs its statements on. */
  readonly pool: PgQueryable;
  /** The validated schema name. */
  readonly schema: string;
  /** The validated table name. */
  readonly table: string;
  /** Delete one bounded batch of dead rows (never a live lease); returns how many were deleted. */
  purgeExpired(options?: PurgeOptions): Promise<number>;
  /**
   * Record a step's result on the record held by `token`, in one statement (see {@link Store.saveStep}).
   * @throws InvalidOptionsError (as a rejection) for a name outside `[A-Za-z0-9._:-]{1,100}`.
   */
  saveStep(key: string, token: number, name: string, value: Uint8Array): Promise<boolean>;
  /** The step results on the record held by `token` (see {@link Store.loadSteps}). */
  loadSteps(key: string, token: number): Promise<Record<string, Uint8Array> | undefined>;
}

/** The fields of {@link PostgresStoreOptions}. */
const POSTGRES_STORE_FIELDS = ['pool', 'schema', 'table', 'prepare', 'busyRetryAfterMs'];

// `prepare: 'true'` (from a configuration file) would otherwise be read as "do not prepare".
function prepareOption(value: unknown): boolean | 'auto' {
  if (value === undefined || value === null) return 'auto';
  if (typeof value === 'boolean' || value === 'auto') return value;
  throw new InvalidOptionsError(
    `postgresStore: prepare: expected true, false or 'auto', got ${shownValue(value)}`,
  );
}

/**
 * Create a PostgreSQL store. Run `migrate()` (or `idempotency-kit migrate`) once beforehand.
 * @example
 * import pg from 'pg';
 * import { migrate, postgresStore } from 'idempotency-kit/postgres';
 * const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL });
 * await migrate(pool);
 * const idempotency = createIdempotency({ store: postgresStore({ pool }) });
 */
export function postgresStore(options: PostgresStoreOptions): PostgresStore {
  const pool = options?.pool;
  if (pool === undefined || pool === null || typeof pool.query !== 'function') {
    throw new InvalidOptionsError('postgresStore: `pool` must have a query(text, params) method');
  }
  // Its completions would store outcomes cut at their first zero byte (see native-client.ts).
  refuseNativeClient(pool, 'postgresStore');
  knownFields(options, 'postgresStore', POSTGRES_STORE_FIELDS);
  const names = tableNames(options.schema ?? DEFAULT_SCHEMA, options.table ?? DEFAULT_TABLE);
  // Autocommit only (see `pool`), so the functions of migration 0008 can be tried, and fallen back from.
  const ops = createOperations(names, {
    prepare: prepareOption(options.prepare),
    singleFunctions: true,
    // Whatever the server's default_transaction_isolation (see read-committed.ts).
    rerunAtReadCommitted: true,
  });
  const busyRetryAfterMs = durationOption(
    options.busyRetryAfterMs,
    'postgresStore: busyRetryAfterMs',
    DEFAULT_BUSY_RETRY_AFTER_MS,
  );

  // Every call goes through here, so no driver error escapes unwrapped.
  async function guarded<T>(operation: string, body: () => Promise<T>): Promise<T> {
    try {
      return await body();
    } catch (error) {
      throw toStoreError(operation, error);
    }
  }

  const store: PostgresStore = {
    name: 'postgres',
    // batch: the engine coalesces concurrent calls into claimMany/completeMany, one statement and one
    // commit for many keys. Every statement costs a commit (and its WAL flush) plus a socket write on
    // each side, so batches should form as soon as two calls are outstanding: measured with
    // bench/http.ts S2, 2 gives ~74% of the no-middleware rate against ~58% with the engine's usual 4.
    // While the process is busy, 1 (see src/store/event-loop-load.ts): S2 57.5% -> 61.5% of the
    // baseline in one run, S1 unchanged; not at all times, because a batch that waits on a row lock (a
    // key held by a postgresTransactional run, up to ~200 ms) then holds up every other call of the engine.
    // steps: recorded in the row's `steps` column (migration 0005), see save-step.sql.
    capabilities: {
      crossProcess: true,
      purge: true,
      batch: true,
      batchMaxInFlight: 2,
      batchMaxInFlightWhenBusy: 1,
      steps: true,
    },
    pool,
    schema: names.schemaName,
    table: names.tableName,
    // Durations are checked outside `guarded`: a caller's mistake is an InvalidOptionsError, not an outage.
    // A claim sent alone waits at most 100 ms for a row a running transaction holds (see held-key.ts), and
    // as long for the table's lock (migration 0008, see operations.ts); so does a release. Completions,
    // extensions and steps wait for the table's lock: they come after the handler's effect.
    claim: async (key, claimOptions) => {
      assertClaimDurations(claimOptions, 'postgresStore');
      return guarded('claim', () =>
        claimUnlessHeld(ops, pool, key, claimOptions, busyRetryAfterMs),
      );
    },
    complete: async (key, token, outcome, retentionMs) => {
      assertPositiveMs(retentionMs, 'retentionMs', 'postgresStore');
      return guarded('complete', () => ops.complete(pool, key, token, outcome, retentionMs));
    },
    claimMany: async (requests) => {
      assertBatchDurations(requests, [], 'postgresStore');
      return guarded('claimMany', () => claimMany(ops, pool, requests, busyRetryAfterMs));
    },
    completeMany: async (requests) => {
      assertBatchDurations([], requests, 'postgresStore');
      return guarded('completeMany', () => completeMany(ops, pool, requests));
    },
    completeAndClaimMany: async (completes, claims) => {
      assertBatchDurations(claims, completes, 'postgresStore');
      return guarded('completeAndClaimMany', () =>
        completeAndClaimMany(ops, pool, completes, claims, busyRetryAfterMs),
      );
    },
    release: (key, token) => guarded('release', () => ops.release(pool, key, token)),
    extend: async (key, token, leaseMs) => {
      assertPositiveMs(leaseMs, 'leaseMs', 'postgresStore');
      return guarded('extend', () => ops.extend(pool, key, token, leaseMs));
    },
    saveStep: async (key, token, name, value) => {
      assertStepName(name, 'postgresStore');
      return guarded('saveStep', () => ops.saveStep(pool, key, token, name, value));
    },
    loadSteps: (key, token) => guarded('loadSteps', () => ops.loadSteps(pool, key, token)),
    // Reads and admin calls wait at most 100 ms for a lock, the table's included (see bounded-lock-wait.ts);
    // loadSteps waits, as the calls after the effect do: a takeover that failed to load is left to its lease,
    // and the retry would wait that whole lease instead of the lock's few moments.
    get: (key) => guarded('get', () => withBoundedLockWait(pool, (db) => ops.get(db, key))),
    inspect: (key) =>
      guarded('inspect', () => withBoundedLockWait(pool, (db) => ops.inspect(db, key))),
    listCrashed: async (listOptions) => {
      const { limit, after } = checkListCrashedOptions(listOptions, 'postgresStore');
      // One row more than the page: it says whether a next page exists.
      const rows = await guarded('listCrashed', () =>
        withBoundedLockWait(pool, (db) => ops.listCrashed(db, after, limit + 1)),
      );
      return keyOrderedPage(rows, limit);
    },
    delete: (key) =>
      guarded('delete', () => withBoundedLockWait(pool, (db) => ops.delete(db, key))),
    purgeExpired: (purgeOptions: PurgeOptions = {}) => {
      const limit = purgeOptions.limit ?? 1000;
      if (!Number.isSafeInteger(limit) || limit < 1) {
        return Promise.reject(
          new InvalidOptionsError(`purgeExpired: limit must be a positive integer, got ${limit}`),
        );
      }
      return guarded('purgeExpired', () => withBoundedLockWait(pool, (db) => ops.purge(db, limit)));
    },
    stats: () => guarded('stats', () => withBoundedLockWait(pool, (db) => ops.stats(db))),
  };
  return store;
}
