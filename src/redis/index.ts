/**
 * `idempotency-kit/redis`: the Redis and Redis Cluster store. Works with a connected node-redis (v5+) or
 * ioredis (v5+) client, or either one's cluster client; neither library is imported at run time.
 * @module
 */
export type {
  IoRedisClusterLike,
  IoRedisLike,
  NodeRedisClientLike,
  NodeRedisClusterLike,
  RedisArg,
  RedisClientLike,
} from './client.js';
export { RedisClientKind } from './client.js';
export type {
  RedisStore,
  RedisStoreOptions,
  RedisStoreWarning,
  WaitForReplicasOptions,
} from './redis-store.js';
export { redisStore } from './redis-store.js';
