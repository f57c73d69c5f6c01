import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll } from 'vitest';
import { redisStore } from '../../src/redis/index.js';
import { defineStoreSuite } from '../../src/testing/index.js';
import { env, requireService } from '../helpers/env.js';
import { connectClient, deleteKeys, type TestRedisClient } from '../helpers/redis-clients.js';

const prefix = `idemtest:io:${randomUUID().slice(0, 8)}:`;
let connection: TestRedisClient;

beforeAll(async () => {
  await requireService('Redis', env.redisUrl);
  connection = await connectClient('ioredis', env.redisUrl);
});

afterAll(async () => {
  await deleteKeys(connection.client, prefix);
  await connection.close();
});

defineStoreSuite({
  name: 'redis (ioredis)',
  // stats() SCANs the shared server's whole keyspace: leases longer than the default 250 ms keep the
  // time-based checks deterministic on a loaded machine.
  shortLeaseMs: 600,
  createStore: (checkPrefix) =>
    redisStore({ client: connection.client, prefix: `${prefix}${checkPrefix}` }),
  crossProcess: {
    module: new URL('../helpers/redis-clients.ts', import.meta.url),
    argument: { lib: 'ioredis', url: env.redisUrl, prefix: `${prefix}storm:` },
    processes: 4,
    claimsPerProcess: 2000,
    keys: 200,
  },
});
