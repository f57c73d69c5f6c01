/**
 * Opening the Redis store a command line names: one server or a Redis Cluster (`--redis-cluster`, found
 * from the one node `--redis-url` names), through node-redis or ioredis (`--redis-client`; by default
 * node-redis when it is installed, else ioredis), whichever the user's application already depends on.
 * The store takes either; the CLI only loads the library it uses.
 * @module
 */
import type { RedisClientLike } from '../redis/client.js';
import { redisStore } from '../redis/redis-store.js';
import type { DatabaseArgs, RedisClientLibrary } from './args.js';
import { importPeer, MissingPeerError } from './peer.js';
import type { OpenTarget } from './targets.js';

/** A connected-to-be client of either library, as far as the CLI uses it. */
interface CliRedisClient {
  connect(): Promise<unknown>;
  on(event: 'error', listener: (error: Error) => void): unknown;
}

interface Credentials {
  username?: string;
  password?: string;
}

interface NodeRedisModule {
  createClient(options: { url: string }): CliRedisClient & { destroy(): void };
  createCluster(options: {
    rootNodes: Array<{ url: string }>;
    defaults?: Credentials;
  }): CliRedisClient & { destroy(): void };
}

interface IoRedisModule {
  Redis: new (
    url: string,
    options: { lazyConnect: boolean; maxRetriesPerRequest: number },
  ) => CliRedisClient & { disconnect(): void };
  Cluster: new (
    startupNodes: string[],
    options: { lazyConnect: boolean; redisOptions: Credentials & { maxRetriesPerRequest: number } },
  ) => CliRedisClient & { disconnect(): void };
}

/** The credentials in a URL, for the nodes a cluster client discovers (they are not in their URLs). */
function credentialsOf(url: string): Credentials {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return {};
  }
  const credentials: Credentials = {};
  if (parsed.username !== '') credentials.username = decodeURIComponent(parsed.username);
  if (parsed.password !== '') credentials.password = decodeURIComponent(parsed.password);
  return credentials;
}

/** A client of `library` on `url` (a Cluster when `cluster`), not connected yet, and how to close it. */
async function clientOf(
  library: RedisClientLibrary,
  url: string,
  cluster: boolean,
): Promise<{ client: CliRedisClient; close(): void }> {
  if (library === 'node-redis') {
    const redis = await importPeer<NodeRedisModule>('redis');
    const client = cluster
      ? redis.createCluster({ rootNodes: [{ url }], defaults: credentialsOf(url) })
      : redis.createClient({ url });
    return { client, close: () => client.destroy() };
  }
  const { Redis, Cluster } = await importPeer<IoRedisModule>('ioredis');
  // One attempt per command: a command line reports an unreachable server at once rather than retrying.
  const client = cluster
    ? new Cluster([url], {
        lazyConnect: true,
        redisOptions: { ...credentialsOf(url), maxRetriesPerRequest: 1 },
      })
    : new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1 });
  return { client, close: () => client.disconnect() };
}

/**
 * Open Redis with the library `--redis-client` names, or node-redis, or else ioredis: the first one
 * installed.
 * @throws Error naming the install command when neither library is installed.
 */
export async function openRedis(redisUrl: string, args: DatabaseArgs): Promise<OpenTarget> {
  const libraries: RedisClientLibrary[] =
    args.redisClient === undefined ? ['node-redis', 'ioredis'] : [args.redisClient];
  let opened: { client: CliRedisClient; close(): void } | undefined;
  for (const library of libraries) {
    try {
      opened = await clientOf(library, redisUrl, args.redisCluster === true);
      break;
    } catch (error) {
      if (!(error instanceof MissingPeerError)) throw error;
    }
  }
  if (opened === undefined) {
    const packages = libraries.map((library) => (library === 'node-redis' ? 'redis' : library));
    // Not a usage error: the command line was right, the machine lacks the driver (exit 1).
    throw new Error(
      `Redis needs the '${packages.join("' or '")}' package: npm install ${packages[0]}`,
    );
  }
  const { client, close } = opened;
  // Reported by the command that fails; a reconnect attempt's error must not crash the process.
  client.on('error', () => {});
  try {
    await client.connect();
  } catch (error) {
    close();
    throw error;
  }
  const prefix = args.prefix ?? 'idem:';
  const store = redisStore({
    client: client as unknown as RedisClientLike,
    prefix,
    checkEvictionPolicy: false,
  });
  // The URL may hold a password: the label names the prefix only.
  const where = args.redisCluster === true ? 'redis cluster' : 'redis';
  return { store, label: `${where} prefix ${prefix}`, close: async () => close() };
}
