/**
 * One connection to the shared Redis for a whole test file: connected before its tests, and, after them,
 * every key under the file's prefix deleted and the connection closed. Kept apart from `redis-clients.ts`,
 * which child processes import without a Vitest runner.
 */
import { afterAll, beforeAll } from 'vitest';
import type { RedisClientLike } from '../../src/redis/index.js';
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
