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
 @module
 */
import { type Duration, MAX_TIMER_MS } from '../core/duration.js';
import { InvalidOptionsError } from '../core/errors.js';
import { booleanOption, durationOption, knownFields, shownValue } from '../core/option-checks.js';
import type { ClaimResult, IdempotencyRecord } from '../core/record.js';
import { assertStepName } from '../core/steps.js';
import { utf8StoredFingerprint } from '../core/stored-fingerprint.js';
import { completeThenClaim } from '../store/complete-then-claim.js';
import { assertPositiveMs, assertReserveMs } from '../store/durations.js';
import { PartialBatchError, partialResults } from '../store/partial-batch.js';
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
import {
  type RedisArg,
  RedisClientKind,
  type RedisClientLike,
  type RedisCommander,
  toCommander,
} from './client.js';
import { completeClaimMany } from './complete-claim-script.js';
import { createGuard, storeFailure } from './guard.js';
import { listCrashedRecords } from './list-crashed.js';
import { outcomeArg } from './outcome-arg.js';
import { type OnShort, type ShortfallHandlers, shortfallHandlers } from './replica-shortfalls.js';
import {
  type Acknowledged,
  fellShort,
  type ReplicaWait,
  ReplicaWaiter,
  type WaitForReplicasOptions,
  waitForReplicasOption,
} from './replica-wait.js';
import {
  decodeClaim,
  decodeClaims,
  decodeCompleteAndClaim,
  decodeFlag,
  decodeFlags,
  decodeGet,
  decodeInspection,
  decodeSteps,
} from './replies.js';
import {
  type LoadedScript,
  loadScript,
  runScript,
  scriptCommand,
  sendScript,
} from './script-runner.js';
import {
  claim,
  claimMany,
  complete,
  completeMany,
  extend,
  get,
  inspect,
  loadSteps,
  release,
  remove,
  saveStep,
} from './scripts.gen.js';
import { checkEvictionPolicy, type RedisStoreWarning } from './startup-check.js';
import { scanStats } from './stats.js';

export type { WaitForReplicasOptions } from './replica-wait.js';
export type { RedisStoreWarning } from './startup-check.js';

/** Options of {@link redisStore}. */
export interface RedisStoreOptions {
  /**
   * A **connected** client: node-redis v5+ (`createClient`/`createCluster`) or ioredis v5+
   * (`new Redis`/`new Cluster`). The store never connects, quits or configures it.
   */
  client: RedisClientLike;
  /**
   * Prepended to every key: not empty (the admin scans would take other applications' `{…}` keys for
   * records), and without `{` or `}` (the hash tag is the storage key). @default 'idem:'
   */
  prefix?: string;
  /**
   * Upper bound of every call, in ms: a Redis that does not answer in time rejects the call with
   * `StoreUnavailableError` (fail closed) instead of hanging. A batch is one call. In ms (at most 2³¹−1,
   * a timer's limit), or a duration string such as `'500ms'`. @default 2000
   */
  timeoutMs?: Duration;
  /**
   * How long the tombstone a release (or an admin delete) leaves behind lives, in ms. While it lives, the
   * next claim's token is at least the released token + 1 whatever Redis's clock says. In ms, or a
   * duration string such as `'1m'`. @default 60_000
   */
  tokenFloorMs?: Duration;
  /** Check `maxmemory-policy` at startup (`CONFIG GET`; a refusal is tolerated). @default true */
  checkEvictionPolicy?: boolean;
  /**
   * Receives startup warnings (at most once per store).
   * @default logs the message with `console.warn`
   */
  onWarning?: (warning: RedisStoreWarning) => void;
  /**
   * After each call that writes, `WAIT` until `count` replicas have acknowledged it, for at most
   * `timeoutMs` (sent on the same connection after the call; the calls of one turn of the event loop
   * share one). A claim that won but was not
   * acknowledged in time fails with `StoreUnavailableError` (nothing runs; a fresh claim is released), and
   * so does a lease extension. A completion, a step and a release are applied whatever the count, and one
   * that fell short rejects with `ReplicationShortError` (its `result` is the answer), which the engine
   * takes as that answer and reports through its `onReplicationShort` hook; a delete is applied and
   * answered as usual (see docs/stores/redis.md, "Durability limits"). Narrows the window in which a
   * failover loses a claim or an outcome; **not a guarantee**. Single node only (refused with a cluster
   * client).
   * @default absent: no `WAIT`
   */
  waitForReplicas?: WaitForReplicasOptions;
}

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

const scripts = {
  claim: loadScript(claim),
  claimMany: loadScript(claimMany),
  complete: loadScript(complete),
  completeMany: loadScript(completeMany),
  completeClaimMany: loadScript(completeClaimMany),
  release: loadScript(release),
  extend: loadScript(extend),
  get: loadScript(get),
  inspect: loadScript(inspect),
  remove: loadScript(remove),
  saveStep: loadScript(saveStep),
  loadSteps: loadScript(loadSteps),
} as const;

/** The fields of {@link RedisStoreOptions}. */
const REDIS_STORE_FIELDS = [
  'client',
  'prefix',
  'timeoutMs',
  'tokenFloorMs',
  'checkEvictionPolicy',
  'onWarning',
  'waitForReplicas',
];

// Redis TTLs are whole milliseconds and must be positive.
function wholeMs(value: number, name: string): number {
  assertPositiveMs(value, name, 'redisStore');
  return Math.ceil(value);
}

// A claim's reservation in whole ms: absent is 0 (none); a value not above the lease reserves nothing.
function reserveOf(value: number | undefined): number {
  if (value === undefined) return 0;
  assertReserveMs(value, 'redisStore');
  return Math.ceil(value);
}

/**
 * Append a batch's per-item durations (retentions) to a script command: once when every item has the
 * same (the usual case: one engine, one retention), else one per item. The batch scripts tell the two
 * apart by their argument count.
 */
function pushOnceOrEach(command: RedisArg[], values: readonly number[]): void {
  let same = true;
  for (let i = 1; i < values.length && same; i++) same = values[i] === values[0];
  if (same) command.push(String(values[0]));
  else for (const value of values) command.push(String(value));
}

/** A batch's claims' durations in whole ms: `leases[i]` and `reserves[i]` for item `i`. */
interface ClaimDurations {
  leases: number[];
  reserves: number[];
}

/**
 * Every claim's lease and reservation in whole ms, checked before anything is sent (a batch is one call,
 * applied whole).
 */
function durationsOf(requests: readonly ClaimRequest[]): ClaimDurations {
  const leases: number[] = [];
  const reserves: number[] = [];
  for (let i = 0; i < requests.length; i++) {
    const request = requests[i] as ClaimRequest;
    leases.push(wholeMs(request.leaseMs, 'leaseMs'));
    reserves.push(reserveOf(request.reserveMs));
  }
  return { leases, reserves };
}

/**
 * Every completion's retention in whole ms, checked before anything is sent, and how many tokens are not
 * safe integers (such a token never matches a record: fenced out without asking Redis).
 */
function retentionsOf(requests: readonly CompleteRequest[]): {
  retentions: number[];
  unsafeTokens: number;
} {
  const retentions: number[] = [];
  let unsafeTokens = 0;
  for (let i = 0; i < requests.length; i++) {
    const request = requests[i] as CompleteRequest;
    retentions.push(wholeMs(request.retentionMs, 'retentionMs'));
    if (!Number.isSafeInteger(request.token)) unsafeTokens++;
  }
  return { retentions, unsafeTokens };
}

/**
 * claim-many-n.lua's arguments: the fingerprints (in their stored form), then (lease, reservation) pairs:
 * one pair when every item has the same (the usual case: one engine, one lease, one retention), else one
 * pair per item. The script tells the two apart by the argument count (n + 2 against 3n, the same layout
 * when n = 1).
 */
function pushClaimArgs(
  command: RedisArg[],
  requests: readonly ClaimRequest[],
  { leases, reserves }: ClaimDurations,
): void {
  const count = requests.length;
  for (let i = 0; i < count; i++) {
    command.push(utf8StoredFingerprint((requests[i] as ClaimRequest).fingerprint));
  }
  let same = true;
  for (let i = 1; i < count && same; i++) {
    same = leases[i] === leases[0] && reserves[i] === reserves[0];
  }
  if (same) {
    command.push(String(leases[0]), String(reserves[0]));
  } else {
    for (let i = 0; i < count; i++) command.push(String(leases[i]), String(reserves[i]));
  }
}

/** complete-many-n.lua's arguments: token and outcome per item, then the retentions. */
function pushCompleteArgs(
  command: RedisArg[],
  items: readonly CompleteRequest[],
  retentions: readonly number[],
): void {
  for (let i = 0; i < items.length; i++) {
    const item = items[i] as CompleteRequest;
    command.push(String(item.token), outcomeArg(item.outcome));
  }
  pushOnceOrEach(command, retentions);
}

/**
 * Run `one` for every request, in order per key and concurrently across keys (Cluster batches: each call
 * goes to its key's node, and a key repeated in the batch still sees its earlier items first).
 */
async function eachInKeyOrder<Req extends { key: string }, Res>(
  requests: readonly Req[],
  one: (request: Req) => Promise<Res>,
): Promise<Res[]> {
  const results: Res[] = new Array(requests.length);
  const chains = new Map<string, Promise<void>>();
  for (const [i, request] of requests.entries()) {
    const previous = chains.get(request.key) ?? Promise.resolve();
    chains.set(
      request.key,
      previous.then(async () => {
        results[i] = await one(request);
      }),
    );
  }
  await Promise.all(chains.values());
  return results;
}

/**
 * A key prefix `redisStore` accepts: a non-empty string without `{` or `}`, which would change the record
 * keys' hash tag (and so their Cluster slot). Not empty: the record keys would be `{<storage key>}`, and the
 * `SCAN` pattern of `stats()`, `listCrashed()` and the CLI, `<prefix>{*}`, would be `{*}`, which matches
 * every other application's hash-tagged key of the database (`{user:1000}`): one whose value happens to
 * read as a record is counted or listed (and the CLI could then delete it), one that does not fails the
 * whole scan. A non-empty prefix matches its own records only, since no prefix holds a `{`: in a key
 * `<prefix>{…}`, the first `{` ends the prefix, so `a{*}` never matches `ab{…}` nor `a:b{…}`.
 * @throws InvalidOptionsError otherwise.
 */
export function checkPrefix(prefix: unknown): string {
  if (typeof prefix !== 'string' || /[{}]/.test(prefix)) {
    throw new InvalidOptionsError(
      `redisStore: \`prefix\` must be a string without \`{\` or \`}\`, got ${shownValue(prefix)}`,
    );
  }
  if (prefix === '') {
    throw new InvalidOptionsError(
      "redisStore: `prefix` must not be empty: its records would be keys `{<storage key>}`, and stats(), listCrashed() and the CLI (which SCAN for `<prefix>{*}`) would take every other `{…}` key of the database for one of them; use a prefix such as 'idem:'",
    );
  }
  return prefix;
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
  if (options === undefined || options === null || options.client === undefined) {
    throw new InvalidOptionsError('redisStore: `client` is required');
  }
  knownFields(options, 'redisStore', REDIS_STORE_FIELDS);
  const commander: RedisCommander = toCommander(options.client);
  const prefix = checkPrefix(options.prefix ?? 'idem:');
  // A timer: past MAX_TIMER_MS Node fires it at once, and every call would time out.
  const callTimeoutMs = durationOption(options.timeoutMs, 'redisStore: timeoutMs', 2000, {
    maxMs: MAX_TIMER_MS,
  });
  const guard = createGuard(callTimeoutMs);
  // Redis TTLs are whole milliseconds.
  const tokenFloorMs = String(
    Math.ceil(durationOption(options.tokenFloorMs, 'redisStore: tokenFloorMs', 60_000)),
  );
  const onWarning =
    options.onWarning ?? ((warning: RedisStoreWarning) => console.warn(warning.message));
  if (typeof onWarning !== 'function') {
    throw new InvalidOptionsError(
      `redisStore: onWarning: expected a function, got ${shownValue(onWarning)}`,
    );
  }
  const checkEviction = booleanOption(
    options.checkEvictionPolicy,
    'redisStore: checkEvictionPolicy',
    true,
  );
  // One script cannot span Cluster slots, and a batch's keys are spread over all of them.
  const cluster =
    commander.kind === RedisClientKind.NodeRedisCluster ||
    commander.kind === RedisClientKind.IoRedisCluster;

  const recordKey = (key: string) => `${prefix}{${key}}`;
  // The record's steps: same hash tag, so the same Cluster slot as the record key.
  const stepsKey = (key: string) => `${prefix}{${key}}:s`;
  /** Append the record key of every item: a batch script's KEYS. */
  const pushRecordKeys = (command: RedisArg[], items: readonly { key: string }[]): void => {
    for (let i = 0; i < items.length; i++)
      command.push(recordKey((items[i] as { key: string }).key));
  };
  const run = (script: (typeof scripts)[keyof typeof scripts], keys: string[], args: RedisArg[]) =>
    runScript(commander, script, keys, args);
  const replicas: ReplicaWait | undefined = waitForReplicasOption(
    options.waitForReplicas,
    callTimeoutMs,
    cluster,
  );
  const waiter = replicas === undefined ? undefined : new ReplicaWaiter(commander, replicas);

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

  /**
   * Send a script call that writes (its `command` built by `scriptCommand`) and decode its reply: the one
   * path of every write, chosen once per store, so that it pays no test and no allocation of its own per
   * call. Without `waitForReplicas`, the call as is. With it, the call followed by its `WAIT` (see
   * {@link ReplicaWaiter}): the reply decoded as usual when enough replicas acknowledged it, else handed to
   * `onShort` (`replica-shortfalls.ts`; absent: the answer stands whatever the count).
   */
  const write: <T>(
    operation: string,
    script: LoadedScript,
    command: RedisArg[],
    decode: (reply: unknown) => T,
    onShort: OnShort<T> | undefined,
  ) => Promise<T> =
    waiter === undefined
      ? (operation, script, command, decode) =>
          guard(operation, () => sendScript(commander, script, command), decode)
      : (operation, script, command, decode, onShort) =>
          guard(
            operation,
            () => waiter.sendScript(script, command),
            (acknowledged: Acknowledged) =>
              onShort !== undefined && fellShort(acknowledged, waiter.wait)
                ? onShort(acknowledged, decode, command)
                : decode(acknowledged.reply),
          );

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
    const command = commandFor(scripts.claim, key, false);
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

  // The batch paths below use indexed loops and build the script's command in place: per item, every
  // `map`, `flatMap` and spread of a batch is an allocation the client pays for on each message.
  function claimMany(requests: readonly ClaimRequest[]): Promise<ClaimResult[]> {
    const count = requests.length;
    if (count === 0) return Promise.resolve([]);
    if (cluster) return eachInKeyOrder(requests, (r) => claimOne(r.key, r));
    if (count === 1) {
      const [only] = requests as [ClaimRequest];
      return claimOne(only.key, only).then((result) => [result]);
    }
    let durations: ClaimDurations;
    try {
      durations = durationsOf(requests);
    } catch (error) {
      return rejected(error);
    }
    const command = scriptCommand(scripts.claimMany, count);
    pushRecordKeys(command, requests);
    pushClaimArgs(command, requests, durations);
    return write(
      'claimMany',
      scripts.claimMany,
      command,
      (reply) => decodeClaims(reply, durations.leases, requests),
      shortfalls?.claims,
    );
  }

  /** `completeMany` of items whose retentions are validated and tokens are safe integers. */
  function sendCompletes(
    items: readonly CompleteRequest[],
    retentions: readonly number[],
  ): Promise<boolean[]> {
    const count = items.length;
    if (count === 0) return Promise.resolve([]);
    if (cluster) return eachInKeyOrder(items, completeOne);
    if (count === 1) return completeOne(items[0] as CompleteRequest).then((flag) => [flag]);
    const command = scriptCommand(scripts.completeMany, count);
    pushRecordKeys(command, items);
    pushCompleteArgs(command, items, retentions);
    return write(
      'completeMany',
      scripts.completeMany,
      command,
      (reply) => decodeFlags(reply, count),
      shortfalls?.completes,
    );
  }

  function completeMany(requests: readonly CompleteRequest[]): Promise<boolean[]> {
    const count = requests.length;
    let checked: ReturnType<typeof retentionsOf>;
    try {
      checked = retentionsOf(requests);
    } catch (error) {
      return rejected(error);
    }
    const { retentions } = checked;
    if (checked.unsafeTokens === 0) return sendCompletes(requests, retentions);
    // A token that is not a safe integer never matches a record: fenced out without asking Redis.
    const sent: number[] = [];
    for (let i = 0; i < count; i++) {
      if (Number.isSafeInteger((requests[i] as CompleteRequest).token)) sent.push(i);
    }
    // Each sent item's answer (or, in a partial rejection, its error) goes back to its own index.
    const spread = <T>(items: readonly T[]): Array<boolean | T> => {
      const results: Array<boolean | T> = requests.map(() => false);
      for (const [j, i] of sent.entries()) results[i] = items[j] as T;
      return results;
    };
    return sendCompletes(
      sent.map((i) => requests[i] as CompleteRequest),
      sent.map((i) => retentions[i] as number),
    ).then(
      (flags) => spread(flags.map((flag) => flag === true)) as boolean[],
      (error: unknown) => {
        const partial = partialResults(error);
        if (!Array.isArray(partial)) throw error;
        throw storeFailure('completeMany', new PartialBatchError(spread(partial as unknown[])));
      },
    );
  }

  /**
   * Both batches in one script call (`complete-claim-script.ts`), on a single node, when every completion
   * can be sent; otherwise, as on a Cluster, `completeMany` then `claimMany`.
   */
  function completeAndClaimMany(
    completes: readonly CompleteRequest[],
    claims: readonly ClaimRequest[],
  ): Promise<CompleteAndClaimResults> {
    const completeCount = completes.length;
    const claimCount = claims.length;
    // Both lists are checked before anything is sent, also on the path that sends them one after the other.
    let checked: ReturnType<typeof retentionsOf>;
    let durations: ClaimDurations;
    try {
      checked = retentionsOf(completes);
      durations = durationsOf(claims);
    } catch (error) {
      return rejected(error);
    }
    if (cluster || checked.unsafeTokens > 0 || completeCount === 0 || claimCount === 0) {
      // Each batch's partial answer (an item refused, a completion short of its replicas) is kept, and
      // the claims are still sent: see completeThenClaim.
      return completeThenClaim(
        () => completeMany(completes),
        () => claimMany(claims),
        claimCount,
        (error) => (error instanceof Error ? error : new Error(String(error))),
      ).catch((error: unknown) => {
        if (!(error instanceof PartialBatchError)) throw error;
        throw storeFailure('completeAndClaimMany', error);
      });
    }
    const command = scriptCommand(scripts.completeClaimMany, completeCount + claimCount);
    pushRecordKeys(command, completes);
    pushRecordKeys(command, claims);
    // ARGV[1] and ARGV[2] (the split) are filled in once complete-many's arguments are counted.
    const split = command.length;
    command.push('', '');
    pushCompleteArgs(command, completes, checked.retentions);
    command[split] = String(completeCount);
    command[split + 1] = String(command.length - split - 2);
    pushClaimArgs(command, claims, durations);
    return write(
      'completeAndClaimMany',
      scripts.completeClaimMany,
      command,
      (reply) => decodeCompleteAndClaim(reply, completeCount, durations.leases, claims),
      shortfalls?.completesAndClaims,
    );
  }

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
