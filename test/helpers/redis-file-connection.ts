/**
 * One connection to the shared Redis for a whole test file: connected before its tests, and, after them,
 * every key under the file's prefix deleted and the connection closed. Kept apart from `redis-clients.ts`,
 * which child processes import without a Vitest runner.
 */
import { afterAll, beforeAll } from 'vitest';
import { toCommander } from '../../src/redis/client.js';
import { type RedisClientLike, type RedisStore, redisStore } from '../../src/redis/index.js';
import { env, requireService } from './env.js';
import { connectClient, deleteKeys, type RedisLib, type TestRedisClient } from './redis-clients.js';

/** Register the file's hooks; `client` is usable from `beforeAll` on (in store factories, tests). */
export function redisForFile(lib: RedisLib, prefix: string): { readonly client: RedisClientLike } {
  let connection: TestRedisClient | undefined;
  beforeAll(async () => {
    await requireService('Redis', env.redisUrl);
    connection = await connectClient(lib, env.redisUrl);
  });
  afterAll(async () => {
    if (connection === undefined) return;
    await deleteKeys(connection.client, prefix);
    await connection.close();
  });
  return {
    get client(): RedisClientLike {
      if (connection === undefined) throw new Error('redisForFile: not connected before the tests');
      return connection.client;
    },
  };
}

/**
 * One connection per client library (node-redis and ioredis) for a whole test file, with the same hooks as
 * {@link redisForFile}: the map is filled before the file's tests, and emptied (keys deleted, connections
 * closed) after them. `database` selects another logical database than the URL's, for a test whose
 * assertions depend on how many keys a `SCAN` walks (the shared database can hold any number of others).
 */
export function redisClientsForFile(
  prefix: string,
  options: { database?: number } = {},
): ReadonlyMap<RedisLib, TestRedisClient> {
  const clients = new Map<RedisLib, TestRedisClient>();
  beforeAll(async () => {
    await requireService('Redis', env.redisUrl);
    const url = new URL(env.redisUrl);
    if (options.database !== undefined) url.pathname = `/${options.database}`;
    for (const lib of ['node-redis', 'ioredis'] as const) {
      clients.set(lib, await connectClient(lib, url.toString()));
    }
  });
  afterAll(async () => {
    for (const connection of clients.values()) {
      await deleteKeys(connection.client, prefix);
      await connection.close();
    }
    clients.clear();
  });
  return clients;
}

/** A Redis store on one client library of {@link redisClientsForFile}, and raw access to its keys. */
export interface RawRedisStore {
  /** The store, under `<prefix><lib>:`. */
  readonly store: RedisStore;
  /** Send a raw command (`['SET', key, …]`) on the same client. */
  raw(args: string[]): Promise<unknown>;
  /** The Redis key of a storage key's record. */
  storeKey(key: string): string;
  /** Redis's clock (TIME), in epoch ms. */
  redisNow(): Promise<number>;
  /**
   * Write by hand a dead lease of `fingerprint` (ended a second ago, attempt 3) whose key lives on for
   * `keepMs`, so that no test has to wait for a lease to end.
   */
  writeDeadLease(
    key: string,
    fingerprint: string,
    keepMs?: number,
  ): Promise<{ token: number; createdAt: number }>;
}

/**
 * Register, in the current `describe`, a store on `lib`'s client of `clients` (built before its tests),
 * with raw access to the keys it writes.
 */
export function rawRedisStore(
  clients: ReadonlyMap<RedisLib, TestRedisClient>,
  lib: RedisLib,
  prefix: string,
): RawRedisStore {
  let store: RedisStore | undefined;
  let send: ((args: string[]) => Promise<unknown>) | undefined;
  beforeAll(() => {
    const connection = clients.get(lib);
    if (connection === undefined) throw new Error(`no ${lib} client`);
    store = redisStore({
      client: connection.client,
      prefix: `${prefix}${lib}:`,
      checkEvictionPolicy: false,
    });
    const commander = toCommander(connection.client);
    send = (args) => commander.send(args[1], args);
  });
  const raw = (args: string[]) => {
    if (send === undefined) throw new Error('rawRedisStore: not connected before the tests');
    return send(args);
  };
  const storeKey = (key: string) => `${prefix}${lib}:{${key}}`;
  const redisNow = async () => {
    const [seconds, micros] = (await raw(['TIME'])) as [unknown, unknown];
    return Number(String(seconds)) * 1000 + Math.floor(Number(String(micros)) / 1000);
  };
  return {
    get store(): RedisStore {
      if (store === undefined) throw new Error('rawRedisStore: not connected before the tests');
      return store;
    },
    raw,
    storeKey,
    redisNow,
    async writeDeadLease(key, fingerprint, keepMs = 60_000) {
      const now = await redisNow();
      const token = now * 1000 - 5_000_000;
      const createdAt = now - 5000;
      const value = `p|${token}|${now - 1000}|${createdAt}|3|${fingerprint}`;
      await raw(['SET', storeKey(key), value, 'PXAT', String(now + keepMs)]);
      return { token, createdAt };
    },
  };
}
