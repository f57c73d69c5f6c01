/**
 * The store gauges on real servers: PostgreSQL (whose dead leases stay as rows until taken over or purged)
 * and Redis (whose in-progress keys expire with their lease), both registered in one registry.
 */
import { randomUUID } from 'node:crypto';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { postgresStore } from '../../../src/postgres/index.js';
import { registerStoreStats } from '../../../src/prometheus/index.js';
import { redisStore } from '../../../src/redis/index.js';
import { env, requireService } from '../../helpers/env.js';
import { type PostgresFixture, setupPostgres } from '../../helpers/postgres-env.js';
import { connectClient, deleteKeys, type TestRedisClient } from '../../helpers/redis-clients.js';

describe('store gauges on PostgreSQL and Redis', () => {
  const prefix = `test:store-stats:${randomUUID()}:`;
  let pg: PostgresFixture;
  let redis: TestRedisClient;

  beforeAll(async () => {
    await requireService('redis', env.redisUrl);
    pg = await setupPostgres('stats');
    redis = await connectClient('node-redis', env.redisUrl);
  });

  afterAll(async () => {
    await pg?.dispose();
    if (redis !== undefined) {
      await deleteKeys(redis.client, prefix);
      await redis.close();
    }
  });

  it('reports in-progress, completed and stale records of each store under its label', async () => {
    const registry = new Registry();
    const stores = {
      postgres: postgresStore({ pool: pg.pool, schema: pg.schema }),
      redis: redisStore({ client: redis.client, prefix, checkEvictionPolicy: false }),
    };
    for (const [label, store] of Object.entries(stores)) {
      registerStoreStats(store, { registry, label, maxAgeMs: 0 });
      await store.claim('live', { fingerprint: '', leaseMs: 60_000 });
      await store.claim('dead', { fingerprint: '', leaseMs: 50 });
      const done = await store.claim('done', { fingerprint: '', leaseMs: 60_000 });
      if (!done.claimed) throw new Error(`${label}: 'done' was not claimed`);
      await store.complete('done', done.token, new Uint8Array([1]), 60_000);
    }
    await new Promise((resolve) => setTimeout(resolve, 150));

    const text = await registry.metrics();
    const sample = (series: string) => {
      const line = text.split('\n').find((l) => l.startsWith(`${series} `));
      return line === undefined ? undefined : Number(line.slice(series.length + 1));
    };
    const records = (store: string, status: string) =>
      sample(`idempotency_store_records{store="${store}",status="${status}"}`);
    expect({
      inProgress: records('postgres', 'in_progress'),
      completed: records('postgres', 'completed'),
      stale: records('postgres', 'stale_lease'),
    }).toEqual({ inProgress: 1, completed: 1, stale: 1 });
    // Redis expires an in-progress key with its lease: a dead lease leaves nothing behind to count.
    expect({
      inProgress: records('redis', 'in_progress'),
      completed: records('redis', 'completed'),
      stale: records('redis', 'stale_lease'),
    }).toEqual({ inProgress: 1, completed: 1, stale: 0 });
    for (const store of ['postgres', 'redis']) {
      const age = sample(`idempotency_store_oldest_lease_age_seconds{store="${store}"}`);
      expect(age, store).toBeGreaterThan(0.1);
      expect(age, store).toBeLessThan(30);
    }
  });
});
