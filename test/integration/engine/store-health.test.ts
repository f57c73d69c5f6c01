/**
 * `checkStoreHealth` on every store, against real servers: healthy stores answer ok; a Redis server that was
 * killed, a PostgreSQL schema that was never migrated and a closed SQLite database answer not ok with the
 * store's own error (the fix named where the store knows it), and a store that hangs is cut at the timeout.
 * The probe writes nothing.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  checkStoreHealth,
  HEALTH_PROBE_KEY,
  isInvalidOptionsError,
  memoryStore,
  type Store,
} from '../../../src/index.js';
import { postgresStore } from '../../../src/postgres/index.js';
import { redisStore } from '../../../src/redis/index.js';
import { sqliteStore } from '../../../src/sqlite/index.js';
import { env, requireService } from '../../helpers/env.js';
import { type PostgresFixture, setupPostgres, uniqueSchema } from '../../helpers/postgres-env.js';
import { connectClient, type TestRedisClient } from '../../helpers/redis-clients.js';
import { freePorts, PORT_SLICES, PrivateRedis } from '../../helpers/redis-servers.js';

let dir: string;
let postgres: PostgresFixture;
let sharedRedis: TestRedisClient;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'ik-health-'));
  await requireService('Redis', env.redisUrl);
  sharedRedis = await connectClient('node-redis', env.redisUrl);
  postgres = await setupPostgres('health');
});

afterAll(async () => {
  await sharedRedis?.close();
  await postgres?.dispose();
  rmSync(dir, { recursive: true, force: true });
});

describe('checkStoreHealth on healthy stores', () => {
  const stores: Array<[string, () => Store]> = [
    ['memory', () => memoryStore()],
    ['sqlite', () => sqliteStore({ database: join(dir, 'healthy.db') })],
    [
      'redis',
      () =>
        redisStore({ client: sharedRedis.client, prefix: 'health:', checkEvictionPolicy: false }),
    ],
    ['postgres', () => postgresStore({ pool: postgres.pool, schema: postgres.schema })],
  ];

  it.each(stores)(
    '%s: ok, with the store name and the latency, and nothing written',
    async (name, create) => {
      // Arrange
      const store = create();
      // Act
      const health = await checkStoreHealth(store);
      // Assert
      expect(health).toEqual({ ok: true, store: name, latencyMs: expect.any(Number) });
      expect(health.latencyMs).toBeGreaterThanOrEqual(0);
      expect(await store.inspect!(HEALTH_PROBE_KEY)).toBeUndefined();
      const stats = await store.stats();
      expect(stats.inProgress + stats.completed + stats.staleLeases).toBe(0);
    },
  );
});

describe('checkStoreHealth on broken stores', () => {
  it('redis: a killed server is not ok, store_unavailable, within the store timeout', async () => {
    // Arrange
    const [port] = await freePorts(PORT_SLICES.health);
    const server = new PrivateRedis(port!);
    await server.start();
    const connection = await connectClient('node-redis', server.url);
    const store = redisStore({
      client: connection.client,
      timeoutMs: 200,
      checkEvictionPolicy: false,
    });
    try {
      expect((await checkStoreHealth(store)).ok).toBe(true);
      await server.kill();
      // Act
      const started = Date.now();
      const health = await checkStoreHealth(store, { timeout: '2s' });
      // Assert
      expect(Date.now() - started).toBeLessThan(1500);
      expect(health).toMatchObject({
        ok: false,
        store: 'redis',
        error: { code: 'store_unavailable' },
      });
    } finally {
      await connection.close();
      await server.dispose();
    }
  });

  it('postgres: a schema never migrated is not ok, and the message says to migrate', async () => {
    // Arrange
    const store = postgresStore({ pool: postgres.pool, schema: uniqueSchema('health_unmigrated') });
    // Act
    const health = await checkStoreHealth(store);
    // Assert
    expect(health).toMatchObject({
      ok: false,
      store: 'postgres',
      error: { code: 'store_unavailable' },
    });
    expect(health.error?.message).toMatch(/migrate/);
  });

  it('sqlite: a closed database is not ok', async () => {
    // Arrange
    const database = new Database(join(dir, 'closed.db'));
    const store = sqliteStore({ database });
    expect((await checkStoreHealth(store)).ok).toBe(true);
    database.close();
    // Act
    const health = await checkStoreHealth(store);
    // Assert
    expect(health).toMatchObject({ ok: false, store: 'sqlite' });
    expect(health.error?.message).toMatch(/not open|closed/i);
  });

  it('a store that never answers is cut at the timeout', async () => {
    // Arrange: a store whose reads hang (a stalled connection with no timeout of its own).
    const hanging: Store = { ...memoryStore(), name: 'hanging', get: () => new Promise(() => {}) };
    // Act
    const started = Date.now();
    const health = await checkStoreHealth(hanging, { timeout: 100 });
    // Assert
    expect(Date.now() - started).toBeGreaterThanOrEqual(95);
    expect(Date.now() - started).toBeLessThan(1000);
    expect(health).toMatchObject({ ok: false, store: 'hanging', error: { code: 'timeout' } });
  });

  it('refuses a timeout that is not a positive duration, or one longer than a timer can wait', async () => {
    for (const timeout of [0, -1, 'soon', '30d', 2 ** 31] as unknown as number[]) {
      await expect(checkStoreHealth(memoryStore(), { timeout })).rejects.toSatisfy(
        isInvalidOptionsError,
      );
    }
  });
});
