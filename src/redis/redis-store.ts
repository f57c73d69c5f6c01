/**
 * The Redis store: each transition is one Lua script call (one round trip), judged by Redis's own clock,
 * with one key per record whose name carries the storage key as hash tag, so it works unchanged on Redis
 * Cluster (a script only ever touches that one key: no CROSSSLOT).
 *
 * Layout: `<prefix>{<storage key>}` is a hash. Fields: `s` status (`p` in progress, `c` completed, `r`
 * tombstone), `f` fingerprint, `t` token, `l` lease end, `a` attempt, `c` creation time (in progress); `o`
 * outcome bytes, `d` completion time, `e` expiry (completed). An in-progress key expires with its lease
 * (PEXPIREAT), a completed key after its retention. A release or an admin delete leaves a tombstone (`s=r`
 * and the token only) for `tokenFloorMs`, so a claim right after it, even in the same microsecond, still
 * gets a larger token; tombstones are invisible to `get`, `claim` and `stats`.
 *
 * Tokens are Redis's `TIME` in microseconds, raised to previous token + 1 when a previous record or
 * tombstone survives: strictly increasing per key as long as Redis's clock does not step back by more
 * than a lease (after an expiry no record survives to compare with).
 @module
 */
import { InvalidOptionsError, StoreUnavailableError } from '../core/errors.js';
import type { ClaimResult, IdempotencyRecord } from '../core/record.js';
import type { ClaimOptions, Store, StoreStats } from '../store/store.js';
import {
  type RedisClientKind,
  type RedisClientLike,
  type RedisCommander,
  toCommander,
} from './client.js';
import { decodeClaim, decodeFlag, decodeGet, replyText } from './replies.js';
import { loadScript, runScript } from './script-runner.js';
import { claim, complete, extend, get, release, remove } from './scripts.gen.js';
import { scanStats } from './stats.js';

/** A warning the store reports through {@link RedisStoreOptions.onWarning}. */
export interface RedisStoreWarning {
  /** Stable code: `eviction_policy` when `maxmemory-policy` is not `noeviction`. */
  code: 'eviction_policy';
  /** Human-readable explanation and fix. */
  message: string;
  /** The policy the server reported. */
  policy: string;
}

/** Options of {@link redisStore}. */
export interface RedisStoreOptions {
  /**
   * A **connected** client: node-redis v5+ (`createClient`/`createCluster`) or ioredis v5+
   * (`new Redis`/`new Cluster`). The store never connects, quits or configures it.
   */
  client: RedisClientLike;
  /** Prepended to every key; must not contain `{` or `}` (the hash tag is the storage key). @default 'idem:' */
  prefix?: string;
  /**
   * Upper bound of every call, in ms: a Redis that does not answer in time rejects the call with
   * `StoreUnavailableError` (fail closed) instead of hanging. @default 2000
   */
  timeoutMs?: number;
  /**
   * How long the tombstone a release (or an admin delete) leaves behind lives, in ms. While it lives, the
   * next claim's token is at least the released token + 1 whatever Redis's clock says. @default 60_000
   */
  tokenFloorMs?: number;
  /** Check `maxmemory-policy` at startup (`CONFIG GET`; a refusal is tolerated). @default true */
  checkEvictionPolicy?: boolean;
  /**
   * Receives startup warnings (at most once per store).
   * @default logs the message with `console.warn`
   */
  onWarning?: (warning: RedisStoreWarning) => void;
}

/** A {@link Store} backed by Redis or Redis Cluster. */
export interface RedisStore extends Store {
  /** Which client was detected. */
  readonly clientKind: RedisClientKind;
  /** The key prefix in use. */
  readonly prefix: string;
  /** Settles (never rejects) once the startup `maxmemory-policy` check is done. */
  readonly ready: Promise<void>;
}

const scripts = {
  claim: loadScript(claim),
  complete: loadScript(complete),
  release: loadScript(release),
  extend: loadScript(extend),
  get: loadScript(get),
  remove: loadScript(remove),
} as const;

function positiveNumber(value: unknown, name: string, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) {
    throw new InvalidOptionsError(`redisStore: \`${name}\` must be a positive number of ms`);
  }
  return value;
}

// Redis TTLs are whole milliseconds and must be positive.
function ttlArg(value: number, name: string): string {
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) {
    throw new InvalidOptionsError(
      `redisStore: ${name} must be a positive number of ms, got ${value}`,
    );
  }
  return String(Math.ceil(value));
}

function configValue(reply: unknown): string | undefined {
  // RESP2: [name, value]; RESP3: a map (an object or a Map depending on the client's type mapping).
  if (Array.isArray(reply)) return reply[1] === undefined ? undefined : replyText(reply[1]);
  if (reply instanceof Map) {
    const [value] = reply.values();
    return value === undefined ? undefined : replyText(value);
  }
  if (typeof reply === 'object' && reply !== null) {
    const [value] = Object.values(reply);
    return value === undefined ? undefined : replyText(value);
  }
  return undefined;
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
  const commander: RedisCommander = toCommander(options.client);
  const prefix = options.prefix ?? 'idem:';
  if (typeof prefix !== 'string' || /[{}]/.test(prefix)) {
    throw new InvalidOptionsError('redisStore: `prefix` must be a string without `{` or `}`');
  }
  const timeoutMs = positiveNumber(options.timeoutMs, 'timeoutMs', 2000);
  const tokenFloorMs = ttlArg(
    positiveNumber(options.tokenFloorMs, 'tokenFloorMs', 60_000),
    'tokenFloorMs',
  );
  const onWarning =
    options.onWarning ?? ((warning: RedisStoreWarning) => console.warn(warning.message));

  const recordKey = (key: string) => `${prefix}{${key}}`;

  /**
   * Bound `call` by `timeoutMs` and turn every failure into `StoreUnavailableError`. A call that loses the
   * race keeps a rejection handler, so a late failure is never an unhandled rejection.
   */
  function guard<T>(operation: string, call: () => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        reject(
          new StoreUnavailableError(
            `Redis store: ${operation} got no answer within ${timeoutMs} ms`,
            { retryAfterMs: timeoutMs },
          ),
        );
      }, timeoutMs);
      let pending: Promise<T>;
      try {
        pending = call();
      } catch (error) {
        pending = Promise.reject(error);
      }
      pending.then(
        (value) => {
          clearTimeout(timer);
          resolve(value);
        },
        (error: unknown) => {
          clearTimeout(timer);
          const message = error instanceof Error ? error.message : String(error);
          reject(
            new StoreUnavailableError(`Redis store: ${operation} failed: ${message}`, {
              cause: error,
            }),
          );
        },
      );
    });
  }

  async function checkEvictionPolicy(): Promise<void> {
    try {
      const nodes = await guard('startup check', () => commander.masters());
      for (const node of nodes) {
        const reply = await guard('startup check', () =>
          node.send(undefined, ['CONFIG', 'GET', 'maxmemory-policy']),
        );
        const policy = configValue(reply);
        if (policy !== undefined && policy !== 'noeviction') {
          onWarning({
            code: 'eviction_policy',
            policy,
            message:
              `idempotency-kit: Redis maxmemory-policy is '${policy}', not 'noeviction': under memory ` +
              'pressure Redis may evict in-flight claims or stored outcomes, and a duplicate execution ' +
              'follows. Use a dedicated instance (or database) with maxmemory-policy noeviction.',
          });
          return;
        }
      }
    } catch {
      // CONFIG is often disabled on managed Redis; the check is advice, never a reason to fail.
    }
  }

  const ready =
    options.checkEvictionPolicy === false
      ? Promise.resolve()
      : checkEvictionPolicy().catch(() => undefined);

  return {
    name: 'redis',
    capabilities: { crossProcess: true, purge: false },
    clientKind: commander.kind,
    prefix,
    ready,

    async claim(key: string, claimOptions: ClaimOptions): Promise<ClaimResult> {
      const leaseMs = ttlArg(claimOptions.leaseMs, 'leaseMs');
      return guard('claim', async () =>
        decodeClaim(
          await runScript(
            commander,
            scripts.claim,
            [recordKey(key)],
            [claimOptions.fingerprint, leaseMs],
          ),
        ),
      );
    },

    async complete(key, token, outcome, retentionMs) {
      const retention = ttlArg(retentionMs, 'retentionMs');
      if (!Number.isSafeInteger(token)) return false;
      // A Buffer view (no copy) of the caller's bytes; both clients send Buffers as raw bytes.
      const bytes = Buffer.from(outcome.buffer, outcome.byteOffset, outcome.byteLength);
      return guard('complete', async () =>
        decodeFlag(
          await runScript(
            commander,
            scripts.complete,
            [recordKey(key)],
            [String(token), bytes, retention],
          ),
        ),
      );
    },

    async release(key, token) {
      if (!Number.isSafeInteger(token)) return false;
      return guard('release', async () =>
        decodeFlag(
          await runScript(
            commander,
            scripts.release,
            [recordKey(key)],
            [String(token), tokenFloorMs],
          ),
        ),
      );
    },

    async extend(key, token, leaseMs) {
      const lease = ttlArg(leaseMs, 'leaseMs');
      if (!Number.isSafeInteger(token)) return false;
      return guard('extend', async () =>
        decodeFlag(
          await runScript(commander, scripts.extend, [recordKey(key)], [String(token), lease]),
        ),
      );
    },

    async get(key): Promise<IdempotencyRecord | undefined> {
      return guard('get', async () =>
        decodeGet(await runScript(commander, scripts.get, [recordKey(key)], [])),
      );
    },

    async delete(key) {
      // A script, not a DEL: it leaves a tombstone, so a later claim still gets a larger token.
      return guard('delete', async () =>
        decodeFlag(await runScript(commander, scripts.remove, [recordKey(key)], [tokenFloorMs])),
      );
    },

    async stats(): Promise<StoreStats> {
      return scanStats(commander, prefix, guard);
    },
  };
}
