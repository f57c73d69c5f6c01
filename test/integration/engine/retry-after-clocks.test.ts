/**
 * `retryAfterMs` of a duplicate while the first request runs, when this process's clock disagrees with the
 * store's (stepped back an hour: a VM resumed, an NTP step; an injected clock stands for it). The record's
 * lease end is on the store's clock, so the wait was inflated by the whole skew: a 30 s lease's duplicate
 * was told to come back in an hour (HTTP `Retry-After: 3630`). It is at most one lease, on every store.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIdempotency, memoryStore, type Store } from '../../../src/index.js';
import { postgresStore } from '../../../src/postgres/index.js';
import { redisStore } from '../../../src/redis/index.js';
import { sqliteStore } from '../../../src/sqlite/index.js';
import { env, requireService } from '../../helpers/env.js';
import { type PostgresFixture, setupPostgres } from '../../helpers/postgres-env.js';
import { connectClient, deleteKeys, type TestRedisClient } from '../../helpers/redis-clients.js';

const prefix = `ik-test:retry-after-clocks:${process.pid}:`;
let dir: string;
let postgres: PostgresFixture;
let ioredis: TestRedisClient;
let nodeRedis: TestRedisClient;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'ik-retry-after-'));
  await requireService('Redis', env.redisUrl);
  ioredis = await connectClient('ioredis', env.redisUrl);
  nodeRedis = await connectClient('node-redis', env.redisUrl);
  postgres = await setupPostgres('retry_after_clocks');
});

afterAll(async () => {
  if (ioredis !== undefined) await deleteKeys(ioredis.client, prefix);
  await ioredis?.close();
  await nodeRedis?.close();
  await postgres?.dispose();
  rmSync(dir, { recursive: true, force: true });
});

const stores: Array<[string, () => Store]> = [
  // The memory store's own clock (the system's) is the store's clock here, as a remote store's would be.
  ['memory', () => memoryStore()],
  ['sqlite', () => sqliteStore({ database: join(dir, 'records.db') })],
  ['redis (ioredis)', () => redisStore({ client: ioredis.client, prefix: `${prefix}io:` })],
  ['redis (node-redis)', () => redisStore({ client: nodeRedis.client, prefix: `${prefix}nr:` })],
  ['postgres', () => postgresStore({ pool: postgres.pool, schema: postgres.schema })],
];

describe('retryAfterMs with this process’s clock an hour behind the store’s', () => {
  it.each(stores)('%s: at most one lease, at least 1 ms', async (_name, create) => {
    // Arrange: the holder on the right clock, the duplicate on one an hour behind; 30 s leases.
    const store = create();
    const holder = createIdempotency({ store, leaseMs: '30s' });
    const behind = createIdempotency({
      store,
      leaseMs: '30s',
      clock: { now: () => Date.now() - 3_600_000 },
    });
    let release!: () => void;
    const key = `key-${Math.random()}`;
    const held = holder.run({ key }, () => new Promise<void>((resolve) => (release = resolve)));
    await new Promise((resolve) => setTimeout(resolve, 100));
    // Act
    const duplicate = await behind.run({ key }, () => 'second');
    release();
    await held;
    // Assert
    expect(duplicate).toEqual({ status: 'in_progress', retryAfterMs: expect.any(Number) });
    const { retryAfterMs } = duplicate as { retryAfterMs: number };
    expect(retryAfterMs).toBeGreaterThanOrEqual(1);
    expect(retryAfterMs).toBeLessThanOrEqual(30_000);
  });
});
