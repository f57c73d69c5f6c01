/**
 * The Redis clients the store accepts, typed structurally (no runtime import of either library), and the
 * one internal shape the store talks to: send a command routed by its key, get bulk replies as `Buffer`s.
 *
 * Supported: node-redis v5+ (`createClient`, `createCluster`) and ioredis v5+ (`new Redis`, `new Cluster`).
 * Which one was passed is detected at run time from the methods it has.
 * @module
 */
import { InvalidOptionsError } from '../core/errors.js';

/** A Redis command argument as both libraries accept it. */
export type RedisArg = string | Buffer;

/** The part of a node-redis (v5+) client the store uses: `createClient(…)` after `connect()`. */
export interface NodeRedisClientLike {
  /**
   * Send a raw command; `options.typeMapping` picks the JavaScript type of each RESP type, and
   * `options.timeout` (0: none) replaces the client's per-command timeout.
   */
  sendCommand(
    args: ReadonlyArray<RedisArg>,
    options?: { typeMapping?: object; timeout?: number },
  ): Promise<unknown>;
}

/** The part of a node-redis (v5+) cluster client the store uses: `createCluster(…)` after `connect()`. */
export interface NodeRedisClusterLike {
  /** Send a raw command to the node that owns `firstKey`. */
  sendCommand(
    firstKey: RedisArg | undefined,
    isReadonly: boolean | undefined,
    args: ReadonlyArray<RedisArg>,
    options?: { typeMapping?: object; timeout?: number },
  ): Promise<unknown>;
  /** The master nodes (for `SCAN` in `stats()`). */
  readonly masters: ReadonlyArray<unknown>;
  /** The client connected to one node. */
  nodeClient(node: never): Promise<NodeRedisClientLike> | NodeRedisClientLike;
}

/** The part of an ioredis (v5+) client the store uses: `new Redis(…)`. */
export interface IoRedisLike {
  /** Send a raw command; bulk replies come back as `Buffer`s. */
  callBuffer(command: string, args: Array<string | Buffer | number>): Promise<unknown>;
  /** Client options (checked for `keyPrefix`, which the store does not support). */
  readonly options?: { keyPrefix?: string } | undefined;
}

/** The part of an ioredis (v5+) cluster client the store uses: `new Cluster(…)`. */
export interface IoRedisClusterLike extends IoRedisLike {
  /** True for a cluster client. */
  readonly isCluster: boolean;
  /** Node clients by role (for `SCAN` in `stats()`). */
  nodes(role?: 'master'): IoRedisLike[];
}

/** Any client `redisStore` accepts: a connected node-redis or ioredis client, or either one's cluster client. */
export type RedisClientLike =
  | NodeRedisClientLike
  | NodeRedisClusterLike
  | IoRedisLike
  | IoRedisClusterLike;

/** Which library and topology a client is, as detected at run time. */
export const RedisClientKind = {
  NodeRedis: 'node-redis',
  NodeRedisCluster: 'node-redis-cluster',
  IoRedis: 'ioredis',
  IoRedisCluster: 'ioredis-cluster',
} as const;

/** One of the {@link RedisClientKind} values. */
export type RedisClientKind = (typeof RedisClientKind)[keyof typeof RedisClientKind];

/**
 * The internal shape every client is reduced to. Bulk-string replies are always `Buffer`s, so binary
 * outcomes survive byte-exact (both libraries decode them as UTF-8 strings by default).
 */
export interface RedisCommander {
  /** Which client this wraps. */
  readonly kind: RedisClientKind;
  /** Send one command; `key` routes it to its Cluster node (ignored on a single node). */
  send(key: string | undefined, args: ReadonlyArray<RedisArg>): Promise<unknown>;
  /** One commander per master node (the client itself when not a cluster), for keyspace scans. */
  masters(): Promise<RedisCommander[]>;
}

// RESP type codes, as node-redis names them in RESP_TYPES; copied so this file imports nothing at run time.
const RESP_BLOB_STRING = 36;
const RESP_SIMPLE_STRING = 43;
// `timeout: 0` turns off node-redis's own per-command timeout (5 s by default in node-redis 6) for the store's
// commands only: the store bounds every call itself (`timeoutMs`), and the client's timeout costs an
// `AbortSignal.timeout` plus two event listeners per command, about a tenth of the client's CPU.
const NODE_REDIS_OPTIONS = {
  typeMapping: { [RESP_BLOB_STRING]: Buffer, [RESP_SIMPLE_STRING]: Buffer },
  timeout: 0,
};

const isFunction = (value: unknown): boolean => typeof value === 'function';

function nodeRedisCommander(client: NodeRedisClientLike): RedisCommander {
  return {
    kind: RedisClientKind.NodeRedis,
    send: (_key, args) => client.sendCommand(args, NODE_REDIS_OPTIONS),
    masters: async () => [nodeRedisCommander(client)],
  };
}

function nodeRedisClusterCommander(cluster: NodeRedisClusterLike): RedisCommander {
  return {
    kind: RedisClientKind.NodeRedisCluster,
    send: (key, args) => cluster.sendCommand(key, false, args, NODE_REDIS_OPTIONS),
    masters: async () => {
      const clients = await Promise.all(
        cluster.masters.map((node) => cluster.nodeClient(node as never)),
      );
      return clients.map(nodeRedisCommander);
    },
  };
}

function ioRedisCommander(client: IoRedisLike, kind: RedisClientKind): RedisCommander {
  return {
    kind,
    send: (_key, args) => {
      // ioredis routes Cluster commands itself, from the key positions it knows for each command.
      const [command, ...rest] = args;
      return client.callBuffer(String(command), rest);
    },
    masters: async () =>
      kind === RedisClientKind.IoRedisCluster
        ? (client as IoRedisClusterLike)
            .nodes('master')
            .map((node) => ioRedisCommander(node, RedisClientKind.IoRedis))
        : [ioRedisCommander(client, kind)],
  };
}

/**
 * Detect which client was passed and wrap it.
 * @throws InvalidOptionsError when `client` is none of the supported shapes, or an ioredis client with a
 * `keyPrefix` (ioredis would prefix script keys but not `SCAN` results; use the store's `prefix` instead).
 */
export function toCommander(client: RedisClientLike): RedisCommander {
  if (typeof client !== 'object' || client === null) {
    throw new InvalidOptionsError(
      'redisStore: `client` must be a connected node-redis or ioredis client',
    );
  }
  const candidate = client as unknown as Record<string, unknown>;
  if (isFunction(candidate.callBuffer)) {
    const io = client as IoRedisLike;
    if (io.options?.keyPrefix) {
      throw new InvalidOptionsError(
        'redisStore: ioredis `keyPrefix` is not supported; pass `prefix` to redisStore instead',
      );
    }
    const cluster = candidate.isCluster === true && isFunction(candidate.nodes);
    return ioRedisCommander(io, cluster ? RedisClientKind.IoRedisCluster : RedisClientKind.IoRedis);
  }
  if (isFunction(candidate.sendCommand)) {
    if (isFunction(candidate.nodeClient) && 'masters' in candidate) {
      return nodeRedisClusterCommander(client as NodeRedisClusterLike);
    }
    return nodeRedisCommander(client as NodeRedisClientLike);
  }
  throw new InvalidOptionsError(
    'redisStore: `client` must be a connected node-redis (v5+) or ioredis client, or a cluster client of either',
  );
}
