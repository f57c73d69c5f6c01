/**
 * A takeover whose store stops answering as it loads the crashed attempt's steps (PostgreSQL and Redis
 * behind a TCP proxy that blackholes the link; each store's own timeout turns the silence into an error).
 * The engine released the claim on the StoreUnavailableError thrown out of the handler, once the link
 * was back: the release deleted the recorded charge and the reservation, and the next retry charged the
 * card again. The claim is now left to its lease: the retry after it takes the key over and replays the
 * charge.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIdempotency, isStoreUnavailableError, type Store } from '../../../src/index.js';
import { postgresStore } from '../../../src/postgres/index.js';
import { redisStore } from '../../../src/redis/index.js';
import { hangAfterCharge } from '../../helpers/crashed-step.js';
import { env, requireService } from '../../helpers/env.js';
import { type PostgresFixture, setupPostgres } from '../../helpers/postgres-env.js';
import { connectClient, deleteKeys, type TestRedisClient } from '../../helpers/redis-clients.js';
import { startTcpProxy, type TcpProxy } from '../../helpers/tcp-proxy.js';

const LEASE_MS = 2000;
/** How long each store waits for an answer before it fails the call. */
const STORE_TIMEOUT_MS = 500;
const prefix = `ik-test:store-failed-steps:${process.pid}:`;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A store whose link to its server the test can cut. */
interface CutStore {
  store: Store;
  proxy: TcpProxy;
}

let postgres: PostgresFixture;
let pgProxy: TcpProxy;
let proxiedPool: pg.Pool;
let redisProxy: TcpProxy;
let proxiedRedis: TestRedisClient;
let directRedis: TestRedisClient;

beforeAll(async () => {
  await requireService('Redis', env.redisUrl);
  postgres = await setupPostgres('store_failed_steps');
  const database = new URL(env.databaseUrl);
  pgProxy = await startTcpProxy({ host: database.hostname, port: Number(database.port || 5432) });
  database.port = String(pgProxy.port);
  proxiedPool = new pg.Pool({
    connectionString: database.href,
    max: 4,
    query_timeout: STORE_TIMEOUT_MS,
    connectionTimeoutMillis: STORE_TIMEOUT_MS,
  });
  proxiedPool.on('error', () => {});
  const redis = new URL(env.redisUrl);
  redisProxy = await startTcpProxy({ host: redis.hostname, port: Number(redis.port || 6379) });
  redis.port = String(redisProxy.port);
  proxiedRedis = await connectClient('ioredis', redis.href);
  directRedis = await connectClient('ioredis', env.redisUrl);
});

afterAll(async () => {
  await proxiedPool?.end();
  await pgProxy?.close();
  await postgres?.dispose();
  if (directRedis !== undefined) await deleteKeys(directRedis.client, prefix);
  await proxiedRedis?.close();
  await directRedis?.close();
  await redisProxy?.close();
});

const stores: Array<[string, () => CutStore]> = [
  [
    'postgres',
    () => ({
      store: postgresStore({ pool: proxiedPool, schema: postgres.schema }),
      proxy: pgProxy,
    }),
  ],
  [
    'redis',
    () => ({
      store: redisStore({ client: proxiedRedis.client, prefix, timeoutMs: STORE_TIMEOUT_MS }),
      proxy: redisProxy,
    }),
  ],
];

describe("a takeover whose store fails to load the crashed attempt's steps", () => {
  it.each(stores)(
    '%s: leaves the claim to its lease, and the retry after it replays the charge',
    async (_name, create) => {
      // Arrange: attempt 1 records its charge, then its process "dies"; its lease ends.
      const { store, proxy } = create();
      const idempotency = createIdempotency({
        store,
        leaseMs: LEASE_MS,
        extendLease: false,
        batch: false,
        cache: false,
      });
      const request = { key: `order-${process.pid}-${Math.random()}`, payload: { amount: 100 } };
      let charges = 0;
      const charge = () => `ch_${++charges}`;
      await hangAfterCharge(idempotency, request, charge);
      await sleep(LEASE_MS + 200);

      // Act: the takeover's claim goes through; then the link is cut as it loads the recorded steps. The
      // link is back (and the stores' clients reconnected) before the handler fails with the error.
      const failed = await idempotency
        .run(request, async (ctx) => {
          proxy.cut();
          try {
            return await ctx.step('charge', charge);
          } finally {
            proxy.restore();
            await sleep(200);
          }
        })
        .catch((error: unknown) => error);
      const meanwhile = await idempotency.run(request, async (ctx) => ctx.step('charge', charge));
      await sleep(LEASE_MS + 200);
      const next = await idempotency.run(request, async (ctx) => ctx.step('charge', charge));

      // Assert
      expect(isStoreUnavailableError(failed)).toBe(true);
      expect(meanwhile).toMatchObject({ status: 'in_progress' });
      expect(next).toMatchObject({ status: 'executed', value: 'ch_1', attempt: 3 });
      expect(charges).toBe(1);
    },
  );
});
