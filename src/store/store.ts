/**
 * The store contract: the one interface every backend implements, and that the conformance suite
 * (`idempotency-kit/testing`) checks.
 *
 * Stores work on storage keys that are already hashed (never raw client keys) and make each transition
 * **one atomic operation**, judged by the store's own clock where it has one.
 * @module
 */
import type { ClaimResult, IdempotencyRecord, InProgressRecord } from '../core/record.js';

/** What a claim needs besides the key. */
export interface ClaimOptions {
  /** Fingerprint of the request; stored with the claim so a concurrent mismatch is visible in flight. */
  fingerprint: string;
  /** Lease length in ms; after it, another attempt may take over. */
  leaseMs: number;
  /**
   * How long from this claim, in ms, the key stays reserved for this fingerprint if the claim is never
   * completed or released (its holder crashed). After the lease ends, an attempt with the same fingerprint
   * takes the key over at once; one with another fingerprint gets the dead record back (a mismatch) until
   * the reservation ends too. The engine passes its retention, so a crashed request's key is guarded as
   * long as a completed one's. A value not above `leaseMs` reserves nothing beyond the lease.
   * @default 0 (once the lease ends, any attempt takes the key over)
   */
  reserveMs?: number;
}

/** One claim of a batch ({@link Store.claimMany}). */
export interface ClaimRequest extends ClaimOptions {
  /** The storage key. */
  key: string;
}

/** One completion of a batch ({@link Store.completeMany}). */
export interface CompleteRequest {
  /** The storage key. */
  key: string;
  /** The holder's fencing token. */
  token: number;
  /** Encoded outcome bytes. */
  outcome: Uint8Array;
  /** How long the outcome is kept, in ms. */
  retentionMs: number;
}

/** What {@link Store.completeAndClaimMany} returns: each list's results in its input order. */
export interface CompleteAndClaimResults {
  /** One per completion: `false` when fenced out. */
  completed: boolean[];
  /** One per claim. */
  claimed: ClaimResult[];
}

/** Options for {@link Store.purgeExpired}. */
export interface PurgeOptions {
  /** At most this many rows are deleted by one call. @default 1000 */
  limit?: number;
}

/** Counts reported by {@link Store.stats}. */
export interface StoreStats {
  /** Live in-progress records (lease not expired). */
  inProgress: number;
  /** Completed records not yet expired. */
  completed: number;
  /** In-progress records whose lease expired and that nobody took over yet. */
  staleLeases: number;
  /** Age in ms of the oldest live in-progress record, or `null` if there is none. */
  oldestLeaseAgeMs: number | null;
}

/** Capabilities a store declares; the conformance suite adapts to them. */
export interface StoreCapabilities {
  /** Several OS processes can share the store safely (false only for the memory store). */
  crossProcess: boolean;
  /** The store supports {@link Store.purgeExpired} (SQL stores; Redis and memory expire by themselves). */
  purge: boolean;
  /**
   * The store implements {@link Store.claimMany} and {@link Store.completeMany}: many transitions in one
   * round trip (the conformance suite counts them when it is given a `roundTrips` counter). The engine
   * then coalesces concurrent calls into batches. @default false
   */
  batch?: boolean;
  /**
   * The engine's default `batch.maxInFlight` for this store: how many store calls may be outstanding
   * before further calls wait and go as one batch. A store whose every call is costly for the backend (a
   * PostgreSQL statement is a commit) asks for fewer, so batches form sooner under load. @default 4
   */
  batchMaxInFlight?: number;
  /**
   * The engine's default `batch.maxInFlightWhenBusy`: the store calls outstanding at once while the
   * process's event loop is busy. A store whose calls cost the process and the backend a fixed amount
   * each, whatever their size (a Redis script call), asks for fewer under load, so that a CPU-bound
   * service sends fewer, larger batches. @default the store's `batchMaxInFlight`
   */
  batchMaxInFlightWhenBusy?: number;
  /**
   * The engine's default `batch.window`: which calls wait for each other to form a batch. `'tick'`, the
   * calls of one event-loop tick (one socket read's deliveries): a store whose call reaches the backend
   * at once, or whose client writes at the end of the turn anyway, loses nothing by sending at the end of
   * each tick. `'turn'`, every call of one turn of the event loop (all the requests one poll phase read),
   * at all times: no built-in store asks for it, as an idle loop's claims would wait for the rest of the
   * poll phase for nothing (see {@link StoreCapabilities.batchWindowWhenBusy}). @default 'tick'
   */
  batchWindow?: BatchWindow;
  /**
   * The engine's default `batch.windowWhenBusy`: the window while the process's event loop is busy (80% or
   * more of the last 100 ms spent running code). A store whose calls answer synchronously (the memory
   * store, SQLite) asks for `'turn'`: a CPU-bound service then claims, runs and answers the requests of one
   * poll phase together instead of each alone (for SQLite, in one transaction and one commit instead of one
   * per call), while an idle one still sends each call at the end of its tick.
   * @default the store's `batchWindow`
   */
  batchWindowWhenBusy?: BatchWindow;
  /**
   * The store implements {@link Store.saveStep} and {@link Store.loadSteps}, so executions can record
   * steps (`RunContext.step`). @default false
   */
  steps?: boolean;
}

/**
 * Which calls wait for each other to form a batch: those of one event-loop tick (`'tick'`, sent at
 * `process.nextTick`), or those of one turn of the event loop (`'turn'`, sent at `setImmediate`).
 */
export type BatchWindow = 'tick' | 'turn';

/**
 * A backend for idempotency records. Every method but the reads (`get`, `inspect`, `listCrashed`,
 * `stats`) and `delete` is a state transition and must be one atomic store operation (one Lua script, one
 * SQL statement, one synchronous SQLite transaction): never a read, a decision in JavaScript and then a
 * write.
 *
 * Failures to reach the backend reject with `StoreUnavailableError`. Invalid durations (`leaseMs` or
 * `retentionMs` not a positive finite number, `reserveMs` not a non-negative finite one, or any of them
 * over 100 years) reject with `InvalidOptionsError` before anything is written; a batch with one is
 * refused whole.
 *
 * A store that waits for replicas to confirm its writes (the Redis store's `waitForReplicas`) may answer
 * a `complete`, `release` or `saveStep` it **applied** but could not confirm with a `ReplicationShortError`
 * rejection whose `result` is the answer (for a batch, that error in place of the item's result in a
 * `PartialBatchError`). The engine takes `result` as the answer and reports the shortfall
 * (`onReplicationShort`); no other store needs to, and the conformance suite never expects it.
 */
export interface Store {
  /** Short name used in logs and errors, e.g. `'redis'`. */
  readonly name: string;
  /** What the store can do. */
  readonly capabilities: StoreCapabilities;

  /**
   * Create an `in_progress` record if the key is absent (or its record expired); take over an
   * `in_progress` record whose lease expired (token and attempt grow), unless the record is still
   * reserved for another fingerprint (see {@link ClaimOptions.reserveMs}); otherwise change nothing and
   * return the existing record (live, or dead but reserved).
   */
  claim(key: string, options: ClaimOptions): Promise<ClaimResult>;

  /**
   * Turn the `in_progress` record held by `token` (with a live lease) into `completed` with `outcome`, kept
   * for `retentionMs`. Returns `false` when fenced out (taken over, expired or removed).
   */
  complete(key: string, token: number, outcome: Uint8Array, retentionMs: number): Promise<boolean>;

  /** Delete the `in_progress` record held by `token`. Returns `false` when fenced out. */
  release(key: string, token: number): Promise<boolean>;

  /** Push the lease of the record held by `token` to now + `leaseMs`. Returns `false` when fenced out. */
  extend(key: string, token: number, leaseMs: number): Promise<boolean>;

  /** The live record for `key`, or `undefined` (absent or expired). */
  get(key: string): Promise<IdempotencyRecord | undefined>;

  /**
   * Remove the record whatever its state (admin). Returns `true` when it removed a live record (one
   * {@link Store.get} would have returned), `false` when there was none: the key is absent, or its record
   * is dead (an expired lease, still reserved for its request or not, or an expired outcome). A dead
   * record is removed all the same: afterwards no reservation holds the key, {@link Store.inspect} returns
   * `undefined`, and the next claim, whatever its fingerprint, wins with a token above every earlier one.
   */
  delete(key: string): Promise<boolean>;

  /**
   * Delete expired completed records and dead leases in one bounded batch; never a live lease, nor a dead
   * one still reserved for its fingerprint. Returns the number deleted. Present when `capabilities.purge` is true.
   */
  purgeExpired?(options?: PurgeOptions): Promise<number>;

  /** Counts by status. */
  stats(): Promise<StoreStats>;

  /**
   * Claim several keys in one round trip. Each item is applied exactly as {@link Store.claim} would apply
   * it, atomically, in array order (a key that appears twice sees the first item's result); the batch as a
   * whole need not be atomic. Results come back in input order. Present when `capabilities.batch` is true.
   */
  claimMany?(requests: readonly ClaimRequest[]): Promise<ClaimResult[]>;

  /**
   * Complete several records in one round trip, each exactly as {@link Store.complete} would, in array
   * order. Results come back in input order. Present when `capabilities.batch` is true.
   */
  completeMany?(requests: readonly CompleteRequest[]): Promise<boolean[]>;

  /**
   * Complete several records, then claim several keys, in one round trip: each completion exactly as
   * {@link Store.completeMany} applies it, then each claim exactly as {@link Store.claimMany} applies it
   * (a claim of a key completed in the same call sees the completed record). Neither list need be atomic
   * as a whole. Results come back in input order. Optional even with `capabilities.batch`: the engine then
   * sends a turn's completions and its claims as two batches.
   */
  completeAndClaimMany?(
    completes: readonly CompleteRequest[],
    claims: readonly ClaimRequest[],
  ): Promise<CompleteAndClaimResults>;

  /**
   * Record `value` as the result of the step `name` on the `in_progress` record held by `token` (with a
   * live lease), replacing an earlier result of that name. Step results belong to the record: a takeover
   * with the same fingerprint keeps them (every later one too: each takeover reserves the key anew, and the
   * steps live as long as the record does, not only as long as the claim that recorded them reserved it), a
   * takeover with another fingerprint, a completion, a release or an expiry drops them. Returns `false` when
   * fenced out. Present when `capabilities.steps` is true.
   *
   * Step names match `[A-Za-z0-9._:-]{1,100}` (the engine checks), so a store may use them as field names.
   */
  saveStep?(key: string, token: number, name: string, value: Uint8Array): Promise<boolean>;

  /**
   * The step results on the `in_progress` record held by `token` (with a live lease), by name: those this
   * execution saved and those the attempts it took over saved. `undefined` when fenced out. Present when
   * `capabilities.steps` is true.
   */
  loadSteps?(key: string, token: number): Promise<Record<string, Uint8Array> | undefined>;

  /**
   * The record of `key` as an operator needs to see it (admin, not on any request path): what `get` returns,
   * and also a crashed claim's dead lease while it is still reserved for its request, which `get` hides
   * although it answers other requests with a mismatch. An in-progress record carries the `reservedUntil`
   * the store keeps (none, or one not after `leaseUntil`, reserves nothing beyond the lease) and the `steps`
   * recorded under it. `undefined` when nothing about the key
   * affects a claim any more (absent, or dead and unreserved). Optional: stores without it can only be
   * inspected through `get`.
   */
  inspect?(key: string): Promise<RecordInspection | undefined>;

  /**
   * One page of the keys whose claim crashed (admin, not on any request path): the in-progress records
   * whose lease has ended while their reservation still runs, exactly those {@link Store.inspect} shows
   * with `leaseUntil <= now < reservedUntil`, each with what `inspect` returns for it (its reservation,
   * its steps, the store clock). At most `limit` records; pass the page's `next` as `after` for the next
   * page (see {@link ListCrashedOptions.after} for the order). A scan of the records, not an index lookup:
   * write paths pay nothing for it. Optional: without it, crashed keys can only be inspected one by one.
   * @throws InvalidOptionsError (as a rejection) for a `limit` that is not a positive integer, or an
   * `after` that is not a position of this store.
   */
  listCrashed?(options: ListCrashedOptions): Promise<CrashedRecordsPage>;

  /** Release resources the store itself opened (never a client the user passed in). */
  close?(): Promise<void>;
}

/** What {@link Store.inspect} returns: a record, and the store clock's time when it was read. */
export interface RecordInspection {
  /** The record (see {@link Store.inspect} for what an in-progress one carries). */
  record: IdempotencyRecord;
  /**
   * The store clock (epoch ms) when the record was read: judge `leaseUntil`, `reservedUntil` and
   * `expiresAt` against it, never against the local clock (Redis and PostgreSQL judge by their own).
   */
  now: number;
}

/** Options of {@link Store.listCrashed}: which page of the listing to read. */
export interface ListCrashedOptions {
  /** At most this many records are returned (a positive integer). */
  limit: number;
  /**
   * Where the page starts: the previous page's {@link CrashedRecordsPage.next}; absent for the first
   * page. The SQL and memory stores list keys in byte order, and their `next` is the last key of the
   * previous page, so any key works here too (the page starts after it). Redis lists in the order of
   * `SCAN`, and its `next` is a `SCAN` position (`<master>:<cursor>[:<key>]`), not a key.
   */
  after?: string | undefined;
}

/** One record of {@link Store.listCrashed}: a crashed claim's key, and what `inspect` returns for it. */
export interface CrashedRecordInspection extends RecordInspection {
  /** The storage key. */
  key: string;
  /** The crashed claim: its lease ended (`leaseUntil <= now`), its reservation did not (`reservedUntil > now`). */
  record: InProgressRecord;
}

/** What {@link Store.listCrashed} returns: one page of crashed records. */
export interface CrashedRecordsPage {
  /**
   * The crashed records of this page, at most `limit`. On Redis the last page may hold none: `SCAN` cannot
   * tell that nothing is left before it has walked the whole keyspace.
   */
  records: CrashedRecordInspection[];
  /** Pass as `after` to read the next page; absent when the listing is complete. */
  next?: string;
}
