/**
 * `withStoreMetrics` must change nothing but the metrics: the store conformance suite passes through it,
 * on the memory store and on the shared Redis server (whose batches go through its wrapper too).
 */
import { randomUUID } from 'node:crypto';
import { Registry } from 'prom-client';
import { afterAll, beforeAll } from 'vitest';
import { memoryStore } from '../../src/index.js';
import { withStoreMetrics } from '../../src/prometheus/index.js';
import { redisStore } from '../../src/redis/index.js';
import { defineStoreSuite } from '../../src/testing/index.js';
import { env, requireService } from '../helpers/env.js';
import { connectClient, deleteKeys, type TestRedisClient } from '../helpers/redis-clients.js';

const prefix = `idemtest:metrics:${randomUUID().slice(0, 8)}:`;
let connection: TestRedisClient;

beforeAll(async () => {
  await requireService('Redis', env.redisUrl);
  connection = await connectClient('node-redis', env.redisUrl);
});

afterAll(async () => {
  await deleteKeys(connection.client, prefix);
  await connection.close();
});

defineStoreSuite({
  name: 'memory, through withStoreMetrics',
  createStore: () => withStoreMetrics(memoryStore(), { registry: new Registry() }),
});

defineStoreSuite({
  name: 'redis (node-redis), through withStoreMetrics',
  shortLeaseMs: 600,
  createStore: (checkPrefix) =>
    withStoreMetrics(redisStore({ client: connection.client, prefix: `${prefix}${checkPrefix}` }), {
      registry: new Registry(),
    }),
});
