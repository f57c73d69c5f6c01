/**
 * Connected Redis clients and stores for the Redis store's tests, for both libraries and both topologies.
 * Also the factory the cross-process claim storm imports in each child process (`createStore`).
 */
import { Cluster, Redis } from 'ioredis';
import { createClient, createCluster } from 'redis';
import { toCommander } from '../../src/redis/client.js';
import { type RedisClientLike, type RedisStore, redisStore } from '../../src/redis/index.js';
import { escapeGlob } from '../../src/redis/stats.js';

/** The client library a test uses. */
export type RedisLib = 'node-redis' | 'ioredis';

/** A connected client and how to close it. */
export interface TestRedisClient {
  client: RedisClientLike;
  close(): Promise<void>;
}

// Errors are reported through the calls' rejections; an 'error' event without a listener would crash.
const ignore = () => undefined;

/** Connect a single-node client of `lib` to `url`. */
export async function connectClient(
  lib: RedisLib,
  url: string,
  options: { offlineQueue?: boolean } = {},
): Promise<TestRedisClient> {
  if (lib === 'node-redis') {
    const client = createClient({
      url,
      disableOfflineQueue: options.offlineQueue === false,
      socket: { reconnectStrategy: (retries) => Math.min(50 * 2 ** retries, 500) },
    });
    client.on('error', ignore);
    await client.connect();
    return {
      client,
      close: async () => {
        if (client.isOpen) client.destroy();
      },
    };
  }
  const client = new Redis(url, {
    lazyConnect: true,
    enableOfflineQueue: options.offlineQueue !== false,
    maxRetriesPerRequest: 1,
    retryStrategy: (times) => Math.min(50 * 2 ** times, 500),
  });
  client.on('error', ignore);
  await client.connect();
  return {
    client,
    close: async () => client.disconnect(),
  };
}

/** Connect a cluster client of `lib` to the given root nodes. */
export async function connectCluster(
  lib: RedisLib,
  rootNodes: Array<{ host: string; port: number }>,
): Promise<TestRedisClient> {
  if (lib === 'node-redis') {
    const cluster = createCluster({
      rootNodes: rootNodes.map(({ host, port }) => ({ url: `redis://${host}:${port}` })),
    });
    cluster.on('error', ignore);
    await cluster.connect();
    return { client: cluster, close: async () => cluster.destroy() };
  }
  const cluster = new Cluster(rootNodes, { lazyConnect: true });
  cluster.on('error', ignore);
  await cluster.connect();
  return { client: cluster, close: async () => cluster.disconnect() };
}

/** Delete every key under `prefix` on every master (test cleanup). */
export async function deleteKeys(client: RedisClientLike, prefix: string): Promise<number> {
  let deleted = 0;
  for (const node of await toCommander(client).masters()) {
    let cursor = '0';
    do {
      const [next, keys] = (await node.send(undefined, [
        'SCAN',
        cursor,
        'MATCH',
        `${escapeGlob(prefix)}*`,
        'COUNT',
        '1000',
      ])) as [Buffer, Buffer[]];
      cursor = next.toString();
      // One key per command: keys of one page may live in different Cluster slots.
      await Promise.all(keys.map((key) => node.send(undefined, ['UNLINK', key])));
      deleted += keys.length;
    } while (cursor !== '0');
  }
  return deleted;
}

/** What a storm child needs to build its store. */
export interface StormStoreArgument {
  lib: RedisLib;
  /** Single-node URL (ignored when `cluster` is given). */
  url: string;
  /** Cluster root nodes, for a cluster client. */
  cluster?: Array<{ host: string; port: number }>;
  prefix: string;
  /** The store's `waitForReplicas`, if any. */
  waitForReplicas?: { count: number; timeoutMs: number };
}

/** The claim storm's factory: each child process connects its own client and builds its own store. */
export async function createStore(argument: StormStoreArgument): Promise<RedisStore> {
  const { client } =
    argument.cluster === undefined
      ? await connectClient(argument.lib, argument.url)
      : await connectCluster(argument.lib, argument.cluster);
  return redisStore({
    client,
    prefix: argument.prefix,
    checkEvictionPolicy: false,
    ...(argument.waitForReplicas !== undefined && {
      timeoutMs: 20_000,
      waitForReplicas: argument.waitForReplicas,
    }),
  });
}
