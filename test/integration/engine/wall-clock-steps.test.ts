/**
 * The wall clock stepping during a run (an NTP step, a VM resumed): the store's clock is the judge of a
 * lease, and this process only measures how long its own lease has left, which a step must not change.
 * Stepped forward a minute, a healthy 30 s lease (held in Redis and PostgreSQL, whose clocks did not move)
 * looked run out, and the next step failed with `LeaseLostError`; a run within `maxExecution` was taken
 * for hung, its signal aborted. Only `Date` is faked: timers, the
 * monotonic clock and the servers keep real time.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { createIdempotency, type Store } from '../../../src/index.js';
import { postgresStore } from '../../../src/postgres/index.js';
import { redisStore } from '../../../src/redis/index.js';
import { env, requireService } from '../../helpers/env.js';
import { type PostgresFixture, setupPostgres } from '../../helpers/postgres-env.js';
import { connectClient, deleteKeys, type TestRedisClient } from '../../helpers/redis-clients.js';

const prefix = `ik-test:wall-clock-steps:${process.pid}:`;
let postgres: PostgresFixture;
let redis: TestRedisClient;

beforeAll(async () => {
  await requireService('Redis', env.redisUrl);
  redis = await connectClient('ioredis', env.redisUrl);
  postgres = await setupPostgres('wall_clock_steps');
});

afterEach(() => {
  vi.useRealTimers();
});

afterAll(async () => {
  if (redis !== undefined) await deleteKeys(redis.client, prefix);
  await redis?.close();
  await postgres?.dispose();
});

const stores: Array<[string, () => Store]> = [
  ['redis', () => redisStore({ client: redis.client, prefix })],
  ['postgres', () => postgresStore({ pool: postgres.pool, schema: postgres.schema })],
];

describe('the wall clock stepping forward during a run', () => {
  it.each(stores)('%s: the next step still runs under the 30 s lease', async (_name, create) => {
    // Arrange
    const idempotency = createIdempotency({ store: create(), leaseMs: '30s', batch: false });
    vi.useFakeTimers({ toFake: ['Date'], now: Date.now() });
    // Act
    const outcome = await idempotency.run({ key: `key-${Math.random()}` }, async (ctx) => {
      await ctx.step('reserve', () => 'reserved');
      vi.setSystemTime(Date.now() + 60_000);
      return ctx.step('charge', () => 'charged');
    });
    // Assert
    expect(outcome).toMatchObject({ status: 'executed', value: 'charged' });
  });

  it.each(stores)(
    '%s: a run well within maxExecution is not taken for hung',
    async (_name, create) => {
      // Arrange: maxExecution 10 minutes; the wall clock steps an hour forward.
      const idempotency = createIdempotency({
        store: create(),
        leaseMs: '30s',
        maxExecution: '10m',
        batch: false,
      });
      vi.useFakeTimers({ toFake: ['Date'], now: Date.now() });
      let aborted: boolean | undefined;
      // Act
      const outcome = await idempotency.run({ key: `key-${Math.random()}` }, async (ctx) => {
        await ctx.step('reserve', () => 'reserved');
        vi.setSystemTime(Date.now() + 3_600_000);
        const charged = await ctx.step('charge', () => 'charged');
        aborted = ctx.signal.aborted;
        return charged;
      });
      // Assert
      expect(outcome).toMatchObject({ status: 'executed', value: 'charged' });
      expect(aborted).toBe(false);
    },
  );
});
