/**
 * The store gauges while a PostgreSQL pool has no connection to give (every client held by long
 * transactions): the store's `stats()` waits in the pool's queue with no timeout of its own. The scrape
 * must still answer, with the other store's samples, and the PostgreSQL ones must come back after.
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

describe('store gauges while the PostgreSQL pool is exhausted', () => {
  const prefix = `test:store-stats-stuck:${randomUUID()}:`;
  let pg: PostgresFixture;
  let redis: TestRedisClient;

  beforeAll(async () => {
    await requireService('redis', env.redisUrl);
    pg = await setupPostgres('statsstuck', { max: 1 });
    redis = await connectClient('node-redis', env.redisUrl);
  });

  afterAll(async () => {
    await pg?.dispose();
    if (redis !== undefined) {
      await deleteKeys(redis.client, prefix);
      await redis.close();
    }
  });

  it('answers the scrape without the stuck store, and reports it again once the pool frees up', async () => {
    const registry = new Registry();
    const postgres = postgresStore({ pool: pg.pool, schema: pg.schema });
    const redisLabelled = redisStore({ client: redis.client, prefix, checkEvictionPolicy: false });
    registerStoreStats(postgres, { registry, label: 'postgres', maxAgeMs: 0, timeoutMs: 300 });
    registerStoreStats(redisLabelled, { registry, label: 'redis', maxAgeMs: 0, timeoutMs: 300 });
    // A long transaction holds the pool's only connection.
    const held = await pg.pool.connect();
    let text: string;
    try {
      const startedAt = Date.now();
      text = await Promise.race([
        registry.metrics(),
        new Promise<string>((resolve) => setTimeout(() => resolve('scrape timed out'), 5_000)),
      ]);
      expect(Date.now() - startedAt).toBeLessThan(2_000);
    } finally {
      held.release();
    }
    expect(text).toContain('idempotency_store_records{store="redis",status="completed"} 0');
    expect(text).not.toContain('store="postgres"');

    // The queued call gets the connection now; the next scrape reports PostgreSQL again.
    await new Promise((resolve) => setTimeout(resolve, 400));
    expect(await registry.metrics()).toContain(
      'idempotency_store_records{store="postgres",status="completed"} 0',
    );
  });
});
