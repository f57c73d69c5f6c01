/** The HTTP conformance suite on the Redis store (node-redis client), for every adapter. */
import { randomUUID } from 'node:crypto';
import { redisStore } from '../../src/redis/index.js';
import { env, requireService } from '../helpers/env.js';
import { allHarnesses } from '../helpers/http-adapters.js';
import { connectClient, deleteKeys, type TestRedisClient } from '../helpers/redis-clients.js';
import { describeHttpSuite } from './http.suite.js';

for (const harness of allHarnesses) {
  const prefix = `idemtest:http:${harness.name}:${randomUUID().slice(0, 8)}:`;
  let connection: TestRedisClient | undefined;
  describeHttpSuite(harness, {
    name: 'redis',
    async create() {
      await requireService('Redis', env.redisUrl);
      connection = await connectClient('node-redis', env.redisUrl);
      return redisStore({ client: connection.client, prefix, checkEvictionPolicy: false });
    },
    async cleanup() {
      if (connection === undefined) return;
      await deleteKeys(connection.client, prefix);
      await connection.close();
    },
  });
}
