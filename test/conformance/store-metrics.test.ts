/**
 * `withStoreMetrics` must change nothing but the metrics: the store conformance suite passes through it,
 * on the memory store and on the shared Redis server (whose batches go through its wrapper too).
 */
import { randomUUID } from 'node:crypto';
import { Registry } from 'prom-client';
import { memoryStore } from '../../src/index.js';
import { withStoreMetrics } from '../../src/prometheus/index.js';
import { redisStore } from '../../src/redis/index.js';
import { defineStoreSuite } from '../../src/testing/index.js';
import { redisForFile } from '../helpers/redis-file-connection.js';

const prefix = `idemtest:metrics:${randomUUID().slice(0, 8)}:`;
const redis = redisForFile('node-redis', prefix);

defineStoreSuite({
  name: 'memory, through withStoreMetrics',
  createStore: () => withStoreMetrics(memoryStore(), { registry: new Registry() }),
});

defineStoreSuite({
  name: 'redis (node-redis), through withStoreMetrics',
  storeClock: 'backend',
  shortLeaseMs: 600,
  // The wrapper adds no state of its own: the Redis suites storm the store across processes.
  crossProcess: false,
  createStore: (checkPrefix) =>
    withStoreMetrics(redisStore({ client: redis.client, prefix: `${prefix}${checkPrefix}` }), {
      registry: new Registry(),
    }),
});
