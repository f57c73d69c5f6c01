/**
 * The SQLite store: records in one table of a SQLite file, shared safely by every process that opens it.
 * Each transition is one SQL statement, except claim: one `BEGIN IMMEDIATE` transaction (the claim upsert
 * and the token counter update). Batches (`claimMany`, `completeMany`) apply each item exactly as the
 * single call would, in order, inside one transaction: one commit (one WAL append) for the whole batch.
 * Recorded steps (`saveStep`, `loadSteps`) live in the record's row, as a JSON object of base64 values.
 * @module
 */
import { bufferView } from '../core/bytes.js';
import { type Clock, systemClock } from '../core/clock.js';
import type { Duration } from '../core/duration.js';
import { InvalidOptionsError, isIdempotencyError, StoreUnavailableError } from '../core/errors.js';
import { booleanOption, knownFields, shownValue, stringOption } from '../core/option-checks.js';
import {
  type ClaimResult,
  type IdempotencyRecord,
  type InProgressRecord,
  RecordStatus,
  reservationMs,
} from '../core/record.js';
import { assertStepName } from '../core/steps.js';
import { utf8StoredFingerprint } from '../core/stored-fingerprint.js';
import { checkListCrashedOptions, keyOrderedPage } from '../store/crashed-paging.js';
import {
  assertBatchDurations,
  assertClaimDurations,
  assertPositiveMs,
} from '../store/durations.js';
import type {
  ClaimOptions,
  ClaimRequest,
  CompleteAndClaimResults,
  CompleteRequest,
  CrashedRecordInspection,
  CrashedRecordsPage,
  ListCrashedOptions,
  PurgeOptions,
  RecordInspection,
  Store,
  StoreStats,
} from '../store/store.js';
import { busyTimeoutOption, openDatabase, type SqliteDatabase, unavailable } from './client.js';
import { migrate as runMigrations } from './migrate.js';
import { onWarningOption, reportMigration, type SqliteStoreWarning } from './schema-warning.js';
import {
  type BlockingRow,
  type ClaimRow,
  checkTableName,
  DEFAULT_TABLE,
  type InspectRow,
  type ListCrashedRow,
  prepareStatements,
  type RecordRow,
  type Statements,
  type StatsRow,
  type StepsRow,
} from './statements.js';
import { walCheckpointer } from './wal-checkpoint.js';
import { enableWal, limitWalSize } from './wal-mode.js';

/** `PRAGMA synchronous` levels the store can set on a file it opens. */
export const SqliteSynchronous = {
  /** fsync on every commit: a completed record survives a power loss. */
  Full: 'full',
  /** fsync at WAL checkpoints only: survives a process crash, may lose the last commits on power loss. */
  Normal: 'normal',
} as const;

/** One of the {@link SqliteSynchronous} values. */
export type SqliteSynchronous = (typeof SqliteSynchronous)[keyof typeof SqliteSynchronous];

/**
 * The parameters of `claim.sql` for a claim at `now` (read under the write lock). A `reserveMs` not above
 * `leaseMs` reserves nothing beyond the lease: `reserved_until` is then NULL. The fingerprint goes in its
 * stored form (a digest when it holds a lone surrogate) and as given, which earlier releases stored.
 * Shared with the transactional mode.
 */
export function claimParams(
  key: string,
  options: ClaimOptions,
  now: number,
): Record<string, unknown> {
  const { fingerprint, leaseMs } = options;
  const reserveMs = reservationMs(options);
  return {
    key,
    fingerprint: utf8StoredFingerprint(fingerprint),
    legacy_fingerprint: fingerprint,
    now,
    now_micros: Math.floor(now * 1000),
    lease_until: now + leaseMs,
    reserved_until: reserveMs > 0 ? now + reserveMs : null,
  };
}

/**
 * The row that keeps a claim with `fingerprint` from taking `key` at `now`, as `claim.sql` judges it: the
 * live record, or a dead lease still reserved for another fingerprint. Never what `get` reads: a dead
 * lease is not a live record. A row of the claim's own fingerprint, stored as a digest or as an earlier
 * release bound it, carries `fingerprint` itself, so that the engine finds the same request (text read
 * back from either form is not the request's). Shared with the transactional mode.
 */
export function readBlocking(
  s: Statements,
  key: string,
  fingerprint: string,
  now: number,
): RecordRow | undefined {
  const params = {
    key,
    fingerprint: utf8StoredFingerprint(fingerprint),
    legacy_fingerprint: fingerprint,
    now,
  };
  const row = s.selectBlockingRecord.get(params) as BlockingRow | undefined;
  if (row?.own_fingerprint === 1) row.fingerprint = fingerprint;
  return row;
}

/**
 * {@link readBlocking} for a claim's read without the write lock, judged at a time read after the read: the
 * row, when it still blocks then, or `undefined` (the caller claims under the write lock, which judges
 * again). Without WAL the read waits for a writer's lock (the busy timeout, up to seconds), and judged at a
 * time read before it, a lease that expired meanwhile was "in progress": a 409 where the key was free to
 * take over. A live record blocks until `expires_at`; a dead lease reserved for another fingerprint is judged
 * again under the lock whenever the clock moved during the read (its reservation is not read here). Shared
 * with the transactional mode.
 * @param before - The time the call read on entry, when it has one (else read here): the read judges at it.
 */
export function readBlockingNow(
  s: Statements,
  key: string,
  fingerprint: string,
  clock: Clock,
  before: number = clock.now(),
): RecordRow | undefined {
  const row = readBlocking(s, key, fingerprint, before);
  if (row === undefined) return undefined;
  const after = clock.now();
  return after === before || row.expires_at > after ? row : undefined;
}

/**
 * The step results of a `load-steps.sql` row: the JSON object's base64 values decoded, each into bytes of
 * its own. Built with `Object.fromEntries`, so any valid name (`__proto__` included) is an own property.
 */
function decodeSteps(row: StepsRow): Record<string, Uint8Array> {
  const encoded = JSON.parse(row.steps) as Record<string, string>;
  return Object.fromEntries(
    Object.entries(encoded).map(([name, base64]) => [
      name,
      new Uint8Array(Buffer.from(base64, 'base64')),
    ]),
  );
}

/** The record of a row of `inspect-record.sql` (or `list-crashed.sql`), with its reservation and steps. */
function toInspectedRecord(row: InspectRow): IdempotencyRecord {
  const record = toRecord(row);
  if (record.status === RecordStatus.InProgress) {
    if (row.reserved_until !== null) record.reservedUntil = row.reserved_until;
    if (row.steps !== null) record.steps = decodeSteps({ steps: row.steps });
  }
  return record;
}

/** Options of {@link sqliteStore}. */
export interface SqliteStoreOptions {
  /**
   * An open better-sqlite3 `Database` (yours: the store never closes it and leaves its pragmas as they
   * are), or a file path: the store opens it with WAL, `busyTimeoutMs` and `synchronous`, keeps its `-wal`
   * file's size in check (docs/stores/sqlite.md, WAL size), and closes it in `close()`.
   */
  database: SqliteDatabase | string;
  /**
   * Name of the records table; `<table>_meta` and `<table>_migrations` sit beside it.
   * @default 'idempotency_records'
   */
  table?: string;
  /** Apply pending migrations when the store is created (safe from several processes at once). @default true */
  migrate?: boolean;
  /**
   * Receives the warning of that migration, when a newer release migrated the table further than this one
   * knows (`{ code: 'schema_ahead', message, version, schemaVersion }`): the store serves on it, and the
   * log should say so. Called at most once, while the store is created.
   * @default logs the message with `console.warn`
   */
  onWarning?: (warning: SqliteStoreWarning) => void;
  /**
   * How long a write waits for another process's write lock before failing with
   * `StoreUnavailableError`, in ms. Set only on a file the store opens. Waiting blocks this process's
   * event loop (better-sqlite3 is synchronous). A whole number of ms up to 2³¹−1 (0: no wait), or a
   * duration string such as `'5s'`.
   * @default 5000
   */
  busyTimeoutMs?: Duration;
  /**
   * `PRAGMA synchronous` for a file the store opens. `'normal'` (with WAL) loses nothing on a process
   * crash and never corrupts the file, but a power loss or OS crash may roll back the last commits;
   * `'full'` makes every acknowledged claim and completion survive that too, at the cost of an fsync per
   * commit (about 6× slower on the disks we measured). See docs/stores/sqlite.md, Durability.
   * @default 'normal'
   */
  synchronous?: SqliteSynchronous;
  /** The clock that judges leases and expiry (SQLite has none of its own). @default systemClock */
  clock?: Clock;
}

/** A {@link Store} on a SQLite file. */
export interface SqliteStore extends Store {
  /** The record as an operator sees it, a reserved dead lease included (see {@link Store.inspect}). */
  inspect(key: string): Promise<RecordInspection | undefined>;
  /** One page of the crashed claims, in byte order of their keys (see {@link Store.listCrashed}). */
  listCrashed(options: ListCrashedOptions): Promise<CrashedRecordsPage>;
  /** The connection in use (yours, or the one the store opened). */
  readonly database: SqliteDatabase;
  /** The records table. */
  readonly table: string;
  /**
   * Delete at most `limit` dead rows (expired leases and expired outcomes), oldest first, in one statement;
   * never a live lease, nor a dead one still reserved for its fingerprint. Run it from a timer or a cron job
   * until it returns less than `limit`.
   */
  purgeExpired(options?: PurgeOptions): Promise<number>;
  /** Close the connection if the store opened it; later calls reject with `StoreUnavailableError`. */
  close(): Promise<void>;
  /** Claim several keys, each as `claim` would, in order, in one transaction. */
  claimMany(requests: readonly ClaimRequest[]): Promise<ClaimResult[]>;
  /** Complete several records, each as `complete` would, in order, in one transaction. */
  completeMany(requests: readonly CompleteRequest[]): Promise<boolean[]>;
  /** Complete several records, then claim several keys, each as a single call would, in one transaction. */
  completeAndClaimMany(
    completes: readonly CompleteRequest[],
    claims: readonly ClaimRequest[],
  ): Promise<CompleteAndClaimResults>;
  /**
   * Record a step's result on the record held by `token`, in one statement (see {@link Store.saveStep}).
   * @throws InvalidOptionsError when `name` does not match `[A-Za-z0-9._:-]{1,100}`.
   */
  saveStep(key: string, token: number, name: string, value: Uint8Array): Promise<boolean>;
  /** The step results on the record held by `token` (see {@link Store.loadSteps}). */
  loadSteps(key: string, token: number): Promise<Record<string, Uint8Array> | undefined>;
}

/**
 * The record a row of `select-record.sql` or `select-blocking-record.sql` holds (shared with the
 * transactional mode). The reservation of an in-progress record is not reported (`reservedUntil` absent),
 * nor are its steps (`loadSteps` gives them to their holder).
 */
export function toRecord(row: RecordRow): IdempotencyRecord {
  if (row.status === RecordStatus.Completed) {
    return {
      status: RecordStatus.Completed,
      fingerprint: row.fingerprint,
      token: row.token,
      // A zero-length BLOB may come back as NULL depending on how it was bound.
      outcome: row.outcome ?? new Uint8Array(0),
      completedAt: row.completed_at ?? row.created_at,
      expiresAt: row.expires_at,
    };
  }
  return {
    status: RecordStatus.InProgress,
    fingerprint: row.fingerprint,
    token: row.token,
    leaseUntil: row.expires_at,
    attempt: row.attempt,
    createdAt: row.created_at,
  };
}

/** The fields of {@link SqliteStoreOptions}. */
const SQLITE_STORE_FIELDS = [
  'database',
  'table',
  'migrate',
  'onWarning',
  'busyTimeoutMs',
  'synchronous',
  'clock',
];

/** The options of {@link sqliteStore}, checked (never coerced) and with their defaults. */
interface SqliteStoreSettings {
  table: string;
  migrate: boolean;
  onWarning: (warning: SqliteStoreWarning) => void;
  busyTimeoutMs: number;
  synchronous: SqliteSynchronous;
  clock: Clock;
}

function checkOptions(options: SqliteStoreOptions): SqliteStoreSettings {
  if (typeof options !== 'object' || options === null) {
    throw new InvalidOptionsError(
      `sqliteStore: expected an object of options, got ${shownValue(options)}`,
    );
  }
  knownFields(options, 'sqliteStore', SQLITE_STORE_FIELDS);
  const { database, synchronous, clock } = options;
  if (typeof database !== 'string' && (typeof database !== 'object' || database === null)) {
    throw new InvalidOptionsError(
      `sqliteStore: database must be a better-sqlite3 Database or a file path, got ${shownValue(database)}`,
    );
  }
  if (
    synchronous !== undefined &&
    synchronous !== null &&
    !Object.values(SqliteSynchronous).includes(synchronous)
  ) {
    throw new InvalidOptionsError(
      `sqliteStore: synchronous must be 'full' or 'normal', got ${shownValue(synchronous)}`,
    );
  }
  if (
    clock !== undefined &&
    clock !== null &&
    (typeof clock !== 'object' || typeof clock.now !== 'function')
  ) {
    throw new InvalidOptionsError(
      `sqliteStore: clock must be an object with a now() method, got ${shownValue(clock)}`,
    );
  }
  return {
    table: checkTableName(stringOption(options.table, 'sqliteStore: table', DEFAULT_TABLE)),
    migrate: booleanOption(options.migrate, 'sqliteStore: migrate', true),
    onWarning: onWarningOption(options.onWarning, 'sqliteStore'),
    busyTimeoutMs: busyTimeoutOption(options.busyTimeoutMs, 'sqliteStore'),
    synchronous: synchronous ?? SqliteSynchronous.Normal,
    clock: clock ?? systemClock,
  };
}

/**
 * Create a store on a SQLite file through better-sqlite3 12 (an optional peer dependency). Several
 * processes may open the same file: claims take SQLite's write lock (`BEGIN IMMEDIATE`), so exactly one
 * wins per key. Leases and expiry are judged by `clock` (the processes of one host share it).
 * @example
 * import { createIdempotency } from 'idempotency-kit';
 * import { sqliteStore } from 'idempotency-kit/sqlite';
 *
 * const store = sqliteStore({ database: './idempotency.db' });
 * const idempotency = createIdempotency({ store, leaseMs: '30s', retentionMs: '24h' });
 */
export function sqliteStore(options: SqliteStoreOptions): SqliteStore {
  const settings = checkOptions(options);
  const { table, clock } = settings;
  const owned = typeof options.database === 'string';
  const db =
    typeof options.database === 'string' ? openOwned(options.database, settings) : options.database;
  let closed = false;

  try {
    if (settings.migrate) reportMigration(runMigrations(db, { table }), settings.onWarning);
  } catch (error) {
    if (owned) db.close();
    throw error;
  }

  // Prepared on first use, so a store created with `migrate: false` before the schema exists still works
  // once someone runs `migrate()`.
  let statements: Statements | undefined;
  // On a file the store opened: a checkpoint of its own now and then, when starvation let the WAL grow.
  const checkpoint =
    typeof options.database === 'string'
      ? walCheckpointer(db, options.database, settings.busyTimeoutMs)
      : undefined;

  // Every operation goes through here: synchronous (so atomic within this process), with driver failures
  // turned into StoreUnavailableError (fail closed).
  function use<T>(action: string, body: (s: Statements, now: number) => T): T {
    if (closed) throw new StoreUnavailableError(`SQLite store: ${action} after close()`);
    try {
      statements ??= prepareStatements(db, table);
      const result = body(statements, clock.now());
      checkpoint?.();
      return result;
    } catch (error) {
      if (isIdempotencyError(error)) throw error;
      throw unavailable(action, error);
    }
  }

  // The write half of claim, in one IMMEDIATE transaction: the claim upsert reads the token counter and
  // the update raises it, with no other writer in between (in this process or any other). Wrapped once:
  // better-sqlite3 compiles BEGIN/COMMIT per wrapper.
  function claimLocked(s: Statements, key: string, claimOptions: ClaimOptions): ClaimResult {
    // Read the clock once the write lock is held: waiting for it must not shorten the lease (nor the
    // reservation).
    const now = clock.now();
    const won = s.claim.get(claimParams(key, claimOptions, now)) as ClaimRow | undefined;
    if (won !== undefined) {
      s.bumpToken.run({ token: won.token });
      return {
        claimed: true,
        token: won.token,
        attempt: won.attempt,
        leaseUntil: won.lease_until,
      };
    }
    // The upsert left in place a live row, or a dead lease reserved for another fingerprint, and nothing
    // can change it before COMMIT.
    const row = readBlocking(s, key, claimOptions.fingerprint, now);
    if (row === undefined) throw new Error(`claim of ${key} found no blocking record`);
    return { claimed: false, record: toRecord(row) };
  }
  const claimTransaction = db.transaction(claimLocked);

  // The items of a claim batch that found no blocking record, claimed in order under one write lock: an
  // item whose key appeared earlier in the batch finds that item's claim, as a later single call would.
  const claimBatchTransaction = db.transaction(
    (s: Statements, requests: readonly ClaimRequest[], pending: number[], out: ClaimResult[]) => {
      for (const i of pending) {
        // A ClaimRequest is its own ClaimOptions (the extra `key` is ignored).
        const request = requests[i] as ClaimRequest;
        out[i] = claimLocked(s, request.key, request);
      }
    },
  );

  function completeOne(s: Statements, request: CompleteRequest, now: number): boolean {
    const { key, token, outcome, retentionMs } = request;
    const params = { key, token, outcome: bufferView(outcome), now, expires_at: now + retentionMs };
    if (s.complete.run(params).changes === 1) return true;
    // A resend after success is still a success; anything else was fenced out.
    return s.isCompletedBy.get({ key, token, now }) !== undefined;
  }
  const completeBatchTransaction = db.transaction(
    (s: Statements, requests: readonly CompleteRequest[], now: number) =>
      requests.map((request) => completeOne(s, request, now)),
  );

  // A turn's completions, then its claims, under one write lock and one commit. A claim runs the single
  // claim's steps: its blocking-record read is inside the lock here, which only makes it more current.
  const completeAndClaimTransaction = db.transaction(
    (
      s: Statements,
      completes: readonly CompleteRequest[],
      claims: readonly ClaimRequest[],
      now: number,
    ): CompleteAndClaimResults => {
      const completed = completes.map((request) => completeOne(s, request, now));
      const claimed = claims.map((request): ClaimResult => {
        const row = readBlocking(s, request.key, request.fingerprint, clock.now());
        if (row !== undefined) return { claimed: false, record: toRecord(row) };
        return claimLocked(s, request.key, request);
      });
      return { completed, claimed };
    },
  );

  return {
    name: 'sqlite',
    // 'turn' while the event loop is busy: better-sqlite3 works synchronously on the event loop, so a
    // call never waits for I/O and batches would never form within a tick of HTTP requests; gathering a
    // whole turn's calls makes one transaction (one commit) of them (Express S2 +247 → +40 µs per request
    // over the baseline). An idle loop keeps the tick: a turn there held every claim of a wave of requests
    // until the poll phase had read them all, for commits it had the time to make one by one (S1 with a
    // 50 ms handler 94.6–95.5% → 97.6–98.1% of the baseline's requests/s, S2 and server CPU level).
    capabilities: {
      crossProcess: true,
      purge: true,
      batch: true,
      batchWindow: 'tick',
      batchWindowWhenBusy: 'turn',
      steps: true,
    },
    database: db,
    table,

    async claim(key: string, claimOptions: ClaimOptions): Promise<ClaimResult> {
      assertClaimDurations(claimOptions, 'sqliteStore');
      return use('claim', (s, now) => {
        // Fast path without the write lock: a live record (a replay, or a claim in flight), or a dead lease
        // still reserved for another fingerprint (a mismatch), is returned as read. It blocked the claim
        // at that instant, which is all a losing claim reports; judged at a time read after the read, as
        // that read may have waited for a writer's lock (readBlockingNow).
        const row = readBlockingNow(s, key, claimOptions.fingerprint, clock, now);
        if (row !== undefined) return { claimed: false, record: toRecord(row) };
        return claimTransaction.immediate(s, key, claimOptions);
      });
    },

    async claimMany(requests: readonly ClaimRequest[]): Promise<ClaimResult[]> {
      assertBatchDurations(requests, [], 'sqliteStore');
      return use('claimMany', (s, now) => {
        const out: ClaimResult[] = new Array(requests.length);
        const pending: number[] = [];
        // Keys of the pending items: a later item of such a key must see that item's claim, so it waits
        // for the lock too. (What blocks a claim depends on its fingerprint: a dead lease reserved for
        // "a" blocks "b" only, so a read made before "a" takes the key over would be stale for "b".)
        const claiming = new Set<string>();
        // The single claim's fast path, item by item: a blocking record is reported as read, without the
        // write lock; only the others are claimed, in one transaction.
        for (let i = 0; i < requests.length; i++) {
          const { key, fingerprint } = requests[i] as ClaimRequest;
          const row = claiming.has(key)
            ? undefined
            : readBlockingNow(s, key, fingerprint, clock, now);
          if (row === undefined) {
            pending.push(i);
            claiming.add(key);
          } else out[i] = { claimed: false, record: toRecord(row) };
        }
        if (pending.length > 0) claimBatchTransaction.immediate(s, requests, pending, out);
        return out;
      });
    },

    async complete(key, token, outcome, retentionMs) {
      assertPositiveMs(retentionMs, 'retentionMs', 'sqliteStore');
      return use('complete', (s, now) => completeOne(s, { key, token, outcome, retentionMs }, now));
    },

    async completeMany(requests: readonly CompleteRequest[]): Promise<boolean[]> {
      assertBatchDurations([], requests, 'sqliteStore');
      return use('completeMany', (s, now) => completeBatchTransaction.immediate(s, requests, now));
    },

    async completeAndClaimMany(
      completes: readonly CompleteRequest[],
      claims: readonly ClaimRequest[],
    ): Promise<CompleteAndClaimResults> {
      assertBatchDurations(claims, completes, 'sqliteStore');
      return use('completeAndClaimMany', (s, now) =>
        completeAndClaimTransaction.immediate(s, completes, claims, now),
      );
    },

    async release(key, token) {
      return use('release', (s, now) => s.release.run({ key, token, now }).changes === 1);
    },

    async extend(key, token, leaseMs) {
      assertPositiveMs(leaseMs, 'leaseMs', 'sqliteStore');
      return use(
        'extend',
        (s, now) => s.extend.run({ key, token, now, lease_until: now + leaseMs }).changes === 1,
      );
    },

    async saveStep(key, token, name, value) {
      assertStepName(name, 'sqliteStore');
      // base64: a JSON string holds text only. One statement, under the guard of complete and extend.
      const encoded = bufferView(value).toString('base64');
      return use(
        'saveStep',
        (s, now) => s.saveStep.run({ key, token, name, value: encoded, now }).changes === 1,
      );
    },

    async loadSteps(key, token) {
      return use('loadSteps', (s, now) => {
        const row = s.loadSteps.get({ key, token, now }) as StepsRow | undefined;
        return row === undefined ? undefined : decodeSteps(row);
      });
    },

    async get(key) {
      return use('get', (s, now) => {
        const row = s.selectRecord.get({ key, now }) as RecordRow | undefined;
        return row === undefined ? undefined : toRecord(row);
      });
    },

    async inspect(key) {
      return use('inspect', (s, now) => {
        const row = s.inspectRecord.get({ key, now }) as InspectRow | undefined;
        return row === undefined ? undefined : { now, record: toInspectedRecord(row) };
      });
    },

    async listCrashed(listOptions) {
      const { limit, after } = checkListCrashedOptions(listOptions, 'sqliteStore');
      return use('listCrashed', (s, now) => {
        // One row more than the page: it says whether a next page exists.
        const params = { now, after: after ?? null, limit: limit + 1 };
        const rows = s.listCrashed.all(params) as ListCrashedRow[];
        const records = rows.map(
          (row): CrashedRecordInspection => ({
            key: row.key,
            now,
            record: toInspectedRecord(row) as InProgressRecord,
          }),
        );
        return keyOrderedPage(records, limit);
      });
    },

    async delete(key) {
      return use('delete', (s, now) => {
        const row = s.deleteRecord.get({ key, now }) as { live: number } | undefined;
        return row?.live === 1;
      });
    },

    async purgeExpired(purgeOptions: PurgeOptions = {}) {
      const limit = purgeOptions.limit ?? 1000;
      if (!(Number.isSafeInteger(limit) && limit > 0)) {
        throw new InvalidOptionsError(
          `purgeExpired: limit must be a positive integer, got ${limit}`,
        );
      }
      return use('purgeExpired', (s, now) => s.purgeExpired.run({ now, limit }).changes);
    },

    async stats(): Promise<StoreStats> {
      return use('stats', (s, now) => {
        const row = s.stats.get({ now }) as StatsRow;
        return {
          inProgress: row.in_progress,
          completed: row.completed,
          staleLeases: row.stale_leases,
          oldestLeaseAgeMs: row.oldest_created_at === null ? null : now - row.oldest_created_at,
        };
      });
    },

    async close() {
      if (closed) return;
      closed = true;
      if (owned && db.open) db.close();
    },
  };
}

// Open a file for the store and set its connection up: WAL lets readers (the claim fast path, replays)
// run beside one writer and makes commits cheaper; the busy timeout lets writers of several processes
// queue for the lock instead of failing at once; the WAL size limit gives back what a stretch of
// checkpoint starvation made the -wal file grow by.
function openOwned(filename: string, settings: SqliteStoreSettings): SqliteDatabase {
  const { busyTimeoutMs } = settings;
  const db = openDatabase(filename, busyTimeoutMs);
  try {
    db.pragma(`busy_timeout = ${busyTimeoutMs}`);
    enableWal(db, busyTimeoutMs);
    limitWalSize(db);
    db.pragma(`synchronous = ${settings.synchronous.toUpperCase()}`);
    return db;
  } catch (error) {
    db.close();
    throw unavailable(`configuring ${filename}`, error);
  }
}
