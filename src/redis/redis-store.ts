/**
 * The Redis store: each transition is one Lua script call (one round trip), judged by Redis's own clock,
 * with one key per record whose name carries the storage key as hash tag, so it works unchanged on Redis
 * Cluster (a single-record script only ever touches that one key: no CROSSSLOT).
 *
 * Layout: `<prefix>{<storage key>}` is one string value, parsed by the scripts and by `replies.ts`:
 * `p|<token>|<leaseUntil>|<createdAt>|<attempt>|<fingerprint>` in progress,
 * `c|<token>|<completedAt>|<expiresAt>|<fingerprint bytes>|<fingerprint><outcome>` completed, and the
 * tombstone `r|<token>`. A string costs Redis one `SET` to write and one `GET` to read, where a hash cost
 * an `HSET`, an `HMGET` and a `PEXPIREAT`; the claim's hot path is `TIME` + `SET NX GET PXAT`. An
 * in-progress key expires with its lease (`PXAT`), or with its claim's reservation (`reserveMs`) when that
 * ends later: an in-progress value whose lease has ended but whose key still exists is a crashed claim's
 * reservation, which only the same fingerprint may take over; `extend` never moves the expiry earlier. A
 * completed key expires after its retention. A release or an admin delete leaves a tombstone for
 * `tokenFloorMs`, so a claim right after it, even in the same microsecond, still gets a larger token (and a
 * reservation ends with it); tombstones are invisible to `get`, `claim` and `stats`.
 *
 * Tokens are Redis's `TIME` in microseconds, raised to previous token + 1 when a previous record or
 * tombstone survives: strictly increasing per key as long as Redis's clock does not step back by more
 * than a lease (after an expiry no record survives to compare with).
 *
 * Steps (`saveStep`, `loadSteps`) live in a second key per record, `<record key>:s`, a hash of the step
 * results plus a lineage field (`#`: the record's `<createdAt>|<fingerprint>`) telling which record they
 * belong to. The hash tag makes it the record key's slot. Claims and completions never touch it (their hot
 * paths are unchanged): a record whose lineage differs (another request's takeover, a fresh claim) simply
 * does not see, and the next step script deletes, the hash; a release and a delete remove it; it expires
 * with the record key.
 *
 * Batches (`claimMany`, `completeMany`) are one script call for the whole batch on a single node. On a
 * Cluster, the keys of a batch live in different slots, which no script may span, so `capabilities.batch`
 * is `false` there and a batch is sent as single calls (pipelined on the clients' connections).
 *
 * This file builds the store and its single-record calls. Beside it: the options and their checks
 * (`redis-store-options.ts`), the key names (`record-keys.ts`), the scripts (`store-scripts.ts`), the
 * durations a call checks before it sends anything (`call-durations.ts`), the one write path and its
 * `WAIT` (`write-path.ts`), and the batch calls and their arguments (`batch-calls.ts`, `batch-args.ts`).
 @module
 */
import type { ClaimResult, IdempotencyRecord } from '../core/record.js';
import { assertStepName } from '../core/steps.js';
import { utf8StoredFingerprint } from '../core/stored-fingerprint.js';
import type {
  ClaimOptions,
  ClaimRequest,
  CompleteAndClaimResults,
  CompleteRequest,
  CrashedRecordsPage,
  ListCrashedOptions,
  RecordInspection,
  Store,
  StoreStats,
} from '../store/store.js';
import { batchCalls } from './batch-calls.js';
import { reserveOf, wholeMs } from './call-durations.js';
import type { RedisArg, RedisClientKind } from './client.js';
import { createGuard } from './guard.js';
import { listCrashedRecords } from './list-crashed.js';
import { outcomeArg } from './outcome-arg.js';
import { recordKeys } from './record-keys.js';
import { checkRedisStoreOptions, type RedisStoreOptions } from './redis-store-options.js';
import { type ShortfallHandlers, shortfallHandlers } from './replica-shortfalls.js';
import { decodeClaim, decodeFlag, decodeGet, decodeInspection, decodeSteps } from './replies.js';
import { type LoadedScript, runScript, scriptCommand } from './script-runner.js';
import { checkEvictionPolicy } from './startup-check.js';
import { scanStats } from './stats.js';
import { scripts } from './store-scripts.js';
import { writePath } from './write-path.js';

export type { RedisStoreOptions } from './redis-store-options.js';
export type { WaitForReplicasOptions } from './replica-wait.js';
export type { RedisStoreWarning } from './startup-check.js';

/** A {@link Store} backed by Redis or Redis Cluster. */
export interface RedisStore extends Store {
  /** The record as an operator sees it, a reserved dead lease included (see {@link Store.inspect}). */
  inspect(key: string): Promise<RecordInspection | undefined>;
  /**
   * One page of the crashed claims under the prefix, in `SCAN` order; `next` is a `SCAN` position, not a
   * key (see {@link Store.listCrashed} and docs/stores/redis.md).
   */
  listCrashed(options: ListCrashedOptions): Promise<CrashedRecordsPage>;
  /** Which client was detected. */
  readonly clientKind: RedisClientKind;
  /** The key prefix in use. */
  readonly prefix: string;
  /** Settles (never rejects) once the startup `maxmemory-policy` check is done. */
  readonly ready: Promise<void>;
  /**
   * Claim several keys, each as `claim` would, in order: one script call on a single node; single calls
   * on a Cluster (where `capabilities.batch` is `false`).
   */
  claimMany(requests: readonly ClaimRequest[]): Promise<ClaimResult[]>;
  /** Complete several records, each as `complete` would, in order; one script call on a single node. */
  completeMany(requests: readonly CompleteRequest[]): Promise<boolean[]>;
  /** Complete several records, then claim several keys, each as a single call would; one script call. */
  completeAndClaimMany(
    completes: readonly CompleteRequest[],
    claims: readonly ClaimRequest[],
  ): Promise<CompleteAndClaimResults>;
  /** Record a step's result on the record held by `token`; one script call. */
  saveStep(key: string, token: number, name: string, value: Uint8Array): Promise<boolean>;
  /** The step results on the record held by `token`; one script call. */
  loadSteps(key: string, token: number): Promise<Record<string, Uint8Array> | undefined>;
}

/**
 * Create a Redis store over a client you already connected.
 * @example
 * import { createClient } from 'redis';
 * import { createIdempotency } from 'idempotency-kit';
 * import { redisStore } from 'idempotency-kit/redis';
 *
 * const client = await createClient({ url: 'redis://127.0.0.1:6379' }).connect();
 * const idempotency = createIdempotency({ store: redisStore({ client, prefix: 'orders:' }) });
 */
export function redisStore(options: RedisStoreOptions): RedisStore {
  const {
    commander,
    prefix,
    callTimeoutMs,
    tokenFloorMs,
    onWarning,
    checkEviction,
    cluster,
    replicas,
  } = checkRedisStoreOptions(options);
  const guard = createGuard(callTimeoutMs);
  const { recordKey, stepsKey, pushRecordKeys, pushStepsKeys } = recordKeys(prefix);
  const run = (script: (typeof scripts)[keyof typeof scripts], keys: string[], args: RedisArg[]) =>
    runScript(commander, script, keys, args);

  const ready = checkEviction
    ? checkEvictionPolicy(commander, guard, onWarning).catch(() => undefined)
    : Promise.resolve();

  function inspectRecord(key: string): Promise<RecordInspection | undefined> {
    return guard(
      'inspect',
      () => run(scripts.inspect, [recordKey(key), stepsKey(key)], []),
      decodeInspection,
    );
  }

  // The methods below are not async functions: on the hot path each promise layer costs client CPU. A
  // bad argument still rejects (never throws), through `rejected`.
  const rejected = (error: unknown) => Promise.reject(error);

  /**
   * A won claim whose write the replicas did not acknowledge is not handed out (`replica-shortfalls.ts`):
   * its caller gets `StoreUnavailableError`, so no handler runs on it. A fresh claim (attempt 1) is then
   * released here, best effort, so a retry need not wait out its lease (its token is this call's alone, and
   * nothing ran under it). A takeover is left to its lease instead: a release would delete the steps the
   * crashed attempt recorded and end its reservation, and the next takeover by the same request keeps both.
   */
  function releaseRefused(claimKey: string, result: ClaimResult): void {
    if (result.claimed && result.attempt === 1) {
      // `claimKey` is the record key (the script call's first key); the steps key is it with `:s`, as
      // `stepsKey` makes it.
      run(scripts.release, [claimKey, `${claimKey}:s`], [String(result.token), tokenFloorMs]).catch(
        () => undefined,
      );
    }
  }

  /** What each write call does when its `WAIT` fell short (only with `waitForReplicas`). */
  const shortfalls: ShortfallHandlers | undefined =
    replicas === undefined ? undefined : shortfallHandlers(replicas, releaseRefused);

  /** Every write call's one path, with its `WAIT` when `waitForReplicas` asks for one. */
  const write = writePath(commander, guard, replicas);

  /** The command of a single-record script call with its record key (and steps key) pushed. */
  const commandFor = (script: LoadedScript, key: string, withSteps: boolean): RedisArg[] => {
    const command = scriptCommand(script, withSteps ? 2 : 1);
    command.push(recordKey(key));
    if (withSteps) command.push(stepsKey(key));
    return command;
  };

  function claimOne(key: string, claimOptions: ClaimOptions): Promise<ClaimResult> {
    let leaseMs: number;
    let reserveMs: number;
    try {
      leaseMs = wholeMs(claimOptions.leaseMs, 'leaseMs');
      reserveMs = reserveOf(claimOptions.reserveMs);
    } catch (error) {
      return rejected(error);
    }
    // With the steps key: a takeover by the same request moves its expiry with the record's (claim-2.lua).
    const command = commandFor(scripts.claim, key, true);
    const { fingerprint } = claimOptions;
    command.push(utf8StoredFingerprint(fingerprint), String(leaseMs), String(reserveMs));
    return write(
      'claim',
      scripts.claim,
      command,
      (reply) => decodeClaim(reply, leaseMs, fingerprint),
      shortfalls?.claim,
    );
  }

  function completeOne(request: CompleteRequest): Promise<boolean> {
    let retention: string;
    try {
      retention = String(wholeMs(request.retentionMs, 'retentionMs'));
    } catch (error) {
      return rejected(error);
    }
    if (!Number.isSafeInteger(request.token)) return Promise.resolve(false);
    const command = commandFor(scripts.complete, request.key, false);
    command.push(String(request.token), outcomeArg(request.outcome), retention);
    return write('complete', scripts.complete, command, decodeFlag, shortfalls?.complete);
  }

  const { claimMany, completeMany, completeAndClaimMany } = batchCalls({
    cluster,
    claimOne,
    completeOne,
    write,
    shortfalls,
    pushRecordKeys,
    pushStepsKeys,
  });

  return {
    name: 'redis',
    // One script call outstanding while the process is busy: each call costs Redis ~6 µs and the client a
    // command's encoding and reply before its first key (see src/store/event-loop-load.ts).
    capabilities: {
      crossProcess: true,
      purge: false,
      batch: !cluster,
      steps: true,
      batchMaxInFlightWhenBusy: 1,
    },
    clientKind: commander.kind,
    prefix,
    ready,
    claim: claimOne,
    claimMany,
    complete: (key, token, outcome, retentionMs) =>
      completeOne({ key, token, outcome, retentionMs }),
    completeMany,
    completeAndClaimMany,

    async release(key, token) {
      if (!Number.isSafeInteger(token)) return false;
      const command = commandFor(scripts.release, key, true);
      command.push(String(token), tokenFloorMs);
      return write('release', scripts.release, command, decodeFlag, shortfalls?.release);
    },

    async extend(key, token, leaseMs) {
      const lease = String(wholeMs(leaseMs, 'leaseMs'));
      if (!Number.isSafeInteger(token)) return false;
      const command = commandFor(scripts.extend, key, true);
      command.push(String(token), lease);
      return write('extend', scripts.extend, command, decodeFlag, shortfalls?.extend);
    },

    async get(key): Promise<IdempotencyRecord | undefined> {
      return guard('get', () => run(scripts.get, [recordKey(key)], []), decodeGet);
    },

    inspect: inspectRecord,

    listCrashed: (listOptions) =>
      listCrashedRecords({ commander, prefix, guard, inspect: inspectRecord }, listOptions),

    async delete(key) {
      // A script, not a DEL: it leaves a tombstone, so a later claim still gets a larger token. Answered
      // whatever the replicas' count (an admin call: no engine to report to).
      const command = commandFor(scripts.remove, key, true);
      command.push(tokenFloorMs);
      return write('delete', scripts.remove, command, decodeFlag, undefined);
    },

    async saveStep(key, token, name, value) {
      assertStepName(name, 'redisStore');
      if (!Number.isSafeInteger(token)) return false;
      const command = commandFor(scripts.saveStep, key, true);
      command.push(String(token), name, outcomeArg(value));
      return write('saveStep', scripts.saveStep, command, decodeFlag, shortfalls?.saveStep);
    },

    async loadSteps(key, token) {
      if (!Number.isSafeInteger(token)) return undefined;
      return guard(
        'loadSteps',
        () => run(scripts.loadSteps, [recordKey(key), stepsKey(key)], [String(token)]),
        decodeSteps,
      );
    },

    async stats(): Promise<StoreStats> {
      return scanStats(commander, prefix, guard);
    },
  };
}
