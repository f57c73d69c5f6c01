/**
 * The options of `redisStore` and their checks: every option is checked (and its default applied) once,
 * when the store is created, so that no call pays for it and a mistake fails at startup, not at the
 * first request.
 * @module
 */
import { type Duration, MAX_TIMER_MS } from '../core/duration.js';
import { InvalidOptionsError } from '../core/errors.js';
import { booleanOption, durationOption, knownFields, shownValue } from '../core/option-checks.js';
import {
  RedisClientKind,
  type RedisClientLike,
  type RedisCommander,
  toCommander,
} from './client.js';
import {
  type ReplicaWait,
  type WaitForReplicasOptions,
  waitForReplicasOption,
} from './replica-wait.js';
import type { RedisStoreWarning } from './startup-check.js';

/** Options of `redisStore`. */
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

/** {@link RedisStoreOptions} checked, with their defaults applied. */
export interface CheckedRedisStoreOptions {
  /** The client, reduced to the one shape the store talks to. */
  commander: RedisCommander;
  /** The key prefix (see {@link checkPrefix}). */
  prefix: string;
  /** The bound of every call, in ms (`timeoutMs`). */
  callTimeoutMs: number;
  /** How long a tombstone lives, in whole ms, as the scripts take it (a string argument). */
  tokenFloorMs: string;
  /** Where startup warnings go. */
  onWarning: (warning: RedisStoreWarning) => void;
  /** Whether to check `maxmemory-policy` at startup. */
  checkEviction: boolean;
  /** True for a cluster client: batches are sent as single calls. */
  cluster: boolean;
  /** The `WAIT` behind each write; `undefined`: none. */
  replicas: ReplicaWait | undefined;
}

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
 * Check every option of `redisStore`, in the order the store always checked them (the first
 * mistake is the one reported), and apply the defaults.
 * @throws InvalidOptionsError on the first option that is missing, unknown or malformed.
 */
export function checkRedisStoreOptions(options: RedisStoreOptions): CheckedRedisStoreOptions {
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
  const replicas: ReplicaWait | undefined = waitForReplicasOption(
    options.waitForReplicas,
    callTimeoutMs,
    cluster,
  );
  return {
    commander,
    prefix,
    callTimeoutMs,
    tokenFloorMs,
    onWarning,
    checkEviction,
    cluster,
    replicas,
  };
}
