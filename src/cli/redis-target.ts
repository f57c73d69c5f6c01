/**
 * Opening the Redis store a command line names: one server or a Redis Cluster (`--redis-cluster`, found
 * from the one node `--redis-url` names), through node-redis or ioredis (`--redis-client`; by default
 * node-redis when it is installed, else ioredis), whichever the user's application already depends on.
 * The store takes either; the CLI only loads the library it uses.
 * @module
 */
import { InvalidOptionsError } from '../core/errors.js';
import type { RedisClientLike } from '../redis/client.js';
import { type RedisStore, redisStore } from '../redis/redis-store.js';
import { checkPrefix } from '../redis/redis-store-options.js';
import type { DatabaseArgs, RedisClientLibrary } from './args.js';
import { importPeer, MissingPeerError } from './peer.js';
import { reachWithin } from './reach-within.js';
import { causeChain, type OpenTarget, targetLabel } from './targets.js';

/** A connected-to-be client of either library, as far as the CLI uses it. */
interface CliRedisClient {
  connect(): Promise<unknown>;
  on(event: 'error', listener: (error: Error) => void): unknown;
}

interface Credentials {
  username?: string;
  password?: string;
}

/** node-redis socket options: one bounded attempt, no reconnection (a command line reports, not waits). */
interface NodeRedisSocket {
  connectTimeout: number;
  reconnectStrategy: false;
}

interface NodeRedisModule {
  createClient(options: { url: string; socket: NodeRedisSocket }): CliRedisClient & {
    destroy(): void;
  };
  createCluster(options: {
    rootNodes: Array<{ url: string }>;
    defaults?: Credentials & { socket: NodeRedisSocket };
  }): CliRedisClient & { destroy(): void };
}

/** ioredis options: one bounded attempt per connection and per command. */
interface IoRedisOptions {
  maxRetriesPerRequest: number;
  connectTimeout: number;
  retryStrategy: () => null;
}

interface IoRedisModule {
  Redis: new (
    url: string,
    options: IoRedisOptions & { lazyConnect: boolean },
  ) => CliRedisClient & { disconnect(): void };
  Cluster: new (
    startupNodes: string[],
    options: {
      lazyConnect: boolean;
      clusterRetryStrategy: () => null;
      redisOptions: Credentials & IoRedisOptions;
    },
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

/**
 * A client of `library` on `url` (a Cluster when `cluster`), not connected yet, and how to close it. One
 * connection attempt, bounded by `connectTimeoutMs`, and no reconnection: a command line reports an
 * unreachable server rather than retrying (node-redis would otherwise retry forever).
 */
async function clientOf(
  library: RedisClientLibrary,
  url: string,
  cluster: boolean,
  connectTimeoutMs: number,
): Promise<{ client: CliRedisClient; close(): void }> {
  if (library === 'node-redis') {
    const redis = await importPeer<NodeRedisModule>('redis');
    const socket: NodeRedisSocket = { connectTimeout: connectTimeoutMs, reconnectStrategy: false };
    const client = cluster
      ? redis.createCluster({ rootNodes: [{ url }], defaults: { ...credentialsOf(url), socket } })
      : redis.createClient({ url, socket });
    return {
      client,
      close: () => {
        // node-redis 5 throws "The client is closed" from destroy() of a client already closed (a failed
        // connect closes it): that would replace the real error, or fail a command that succeeded.
        try {
          client.destroy();
        } catch {
          // Closed already: nothing left to release.
        }
      },
    };
  }
  const { Redis, Cluster } = await importPeer<IoRedisModule>('ioredis');
  const options: IoRedisOptions = {
    maxRetriesPerRequest: 1,
    connectTimeout: connectTimeoutMs,
    retryStrategy: () => null,
  };
  const client = cluster
    ? new Cluster([url], {
        lazyConnect: true,
        clusterRetryStrategy: () => null,
        redisOptions: { ...credentialsOf(url), ...options },
      })
    : new Redis(url, { lazyConnect: true, ...options });
  return { client, close: () => client.disconnect() };
}

/** `host:port` of a Redis URL, for messages: never the password the URL may hold. */
function serverOf(url: string): string {
  try {
    const parsed = new URL(url);
    return `${parsed.hostname}:${parsed.port === '' ? '6379' : parsed.port}`;
  } catch {
    return 'the --redis-url server';
  }
}

/**
 * Connect within `timeoutMs`. Both libraries report the cause of a failed attempt on `error` (ioredis
 * rejects `connect()` with only "Connection is closed."): the message carries the last one.
 * @throws StoreUnavailableError naming the server (not the URL's password) and the cause, or the timeout.
 */
async function connectWithin(
  client: CliRedisClient,
  url: string,
  timeoutMs: number,
): Promise<void> {
  let lastError: Error | undefined;
  client.on('error', (error) => {
    lastError = error;
  });
  await reachWithin(
    client.connect(),
    `Redis at ${serverOf(url)}`,
    timeoutMs,
    (error) => lastError ?? (error as Error),
  );
}

/**
 * Refuse a `--redis-url` that is not a `redis:` or `rediss:` URL, before any library sees it: ioredis takes
 * any other string for a Unix socket path or a host name, and its connection error then quotes that string
 * whole, password included (`connect ENOENT //user:password@host:6379`). The message shows nothing of the
 * URL: even a malformed one may hold the password.
 * @throws InvalidOptionsError naming the option.
 */
function checkRedisUrl(url: string): void {
  let protocol: string | undefined;
  try {
    protocol = new URL(url).protocol;
  } catch {
    protocol = undefined;
  }
  if (protocol !== 'redis:' && protocol !== 'rediss:') {
    throw new InvalidOptionsError(
      '--redis-url: expected a redis:// or rediss:// URL (the value is not shown: it may hold a password)',
    );
  }
}

/**
 * Open Redis with the library `--redis-client` names, or node-redis, or else ioredis: the first one
 * installed; the connection must be up within `connectTimeoutMs`.
 * @throws InvalidOptionsError for a URL that is not `redis:` or `rediss:`, or a prefix the store refuses
 *   (both before connecting); Error naming the install command when neither library is installed;
 *   StoreUnavailableError when the server cannot be reached in time.
 */
export async function openRedis(
  redisUrl: string,
  args: DatabaseArgs,
  connectTimeoutMs: number,
): Promise<OpenTarget> {
  // A bad URL or prefix is a usage error (exit 2), refused before anything is loaded or connected.
  checkRedisUrl(redisUrl);
  const prefix = checkPrefix(args.prefix ?? 'idem:');
  const libraries: RedisClientLibrary[] =
    args.redisClient === undefined ? ['node-redis', 'ioredis'] : [args.redisClient];
  let opened: { client: CliRedisClient; close(): void } | undefined;
  for (const library of libraries) {
    try {
      opened = await clientOf(library, redisUrl, args.redisCluster === true, connectTimeoutMs);
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
  // Errors are reported by the command that fails (connectWithin listens): one must not crash the process.
  // Closed on any failure from here on: a connected client left open keeps the process alive.
  let store: RedisStore;
  try {
    await connectWithin(client, redisUrl, connectTimeoutMs);
    store = redisStore({
      client: client as unknown as RedisClientLike,
      prefix,
      checkEvictionPolicy: false,
    });
  } catch (error) {
    close();
    throw error;
  }
  return {
    store,
    label: targetLabel({ ...args, redisUrl }),
    close: async () => close(),
    interrupted: isRedisInterruption,
  };
}

/**
 * Whether a command's failure means the server went away (a dropped or silenced connection) rather than
 * that it refused a command: an error reply (`MOVED`, `WRONGTYPE`, `NOPERM`…) anywhere in the cause
 * chain is an answer, not an interruption. node-redis calls its replies `ErrorReply` (`SimpleError`,
 * `BlobError`), ioredis `ReplyError`.
 */
function isRedisInterruption(error: unknown): boolean {
  // By class name: node-redis leaves `name` as 'Error' on its replies.
  return !causeChain(error).some(
    (cause) => cause instanceof Error && REPLY_ERROR.test(cause.constructor.name),
  );
}

const REPLY_ERROR = /^(?:ErrorReply|SimpleError|BlobError|ReplyError)$/;
