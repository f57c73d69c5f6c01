import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isStoreUnavailableError } from '../../../src/core/errors.js';
import { type RedisStoreWarning, redisStore } from '../../../src/redis/index.js';
import { env, requireService } from '../../helpers/env.js';
import { connectClient, type RedisLib } from '../../helpers/redis-clients.js';
import { freePorts, PORT_SLICES, PrivateRedis } from '../../helpers/redis-servers.js';

let evicting: PrivateRedis;
let noConfig: PrivateRedis;

beforeAll(async () => {
  await requireService('Redis', env.redisUrl);
  const [a, b] = await freePorts(PORT_SLICES.startupCheck, 2);
  evicting = new PrivateRedis(a!, ['--maxmemory-policy', 'allkeys-lru']);
  // A managed Redis often refuses CONFIG: renaming it away gives the same "unknown command" answer.
  noConfig = new PrivateRedis(b!, ['--rename-command', 'CONFIG', '']);
  await Promise.all([evicting.start(), noConfig.start()]);
});

afterAll(async () => {
  await Promise.all([evicting?.dispose(), noConfig?.dispose()]);
});

describe.each<RedisLib>(['node-redis', 'ioredis'])('redis store startup check (%s)', (lib) => {
  it('warns once when maxmemory-policy is not noeviction', async () => {
    // Arrange
    const connection = await connectClient(lib, evicting.url);
    const warnings: RedisStoreWarning[] = [];
    // Act
    const store = redisStore({
      client: connection.client,
      prefix: `startup:${lib}:`,
      onWarning: (w) => warnings.push(w),
    });
    await store.ready;
    await store.claim('k', { fingerprint: 'fp', leaseMs: 1000 });
    // Assert
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ code: 'eviction_policy', policy: 'allkeys-lru' });
    expect(warnings[0]?.message).toContain('noeviction');
    await connection.close();
  });

  it('tolerates a server that refuses CONFIG and works normally', async () => {
    // Arrange
    const connection = await connectClient(lib, noConfig.url);
    const warnings: RedisStoreWarning[] = [];
    // Act
    const store = redisStore({
      client: connection.client,
      prefix: `startup:${lib}:`,
      onWarning: (w) => warnings.push(w),
    });
    await store.ready;
    const claim = await store.claim('k', { fingerprint: 'fp', leaseMs: 1000 });
    // Assert
    expect(warnings).toEqual([]);
    expect(claim.claimed).toBe(true);
    await connection.close();
  });

  it('stays silent on the shared server, which runs with noeviction', async () => {
    // Arrange
    const connection = await connectClient(lib, env.redisUrl);
    const warnings: RedisStoreWarning[] = [];
    // Act
    const store = redisStore({
      client: connection.client,
      prefix: `startup:${lib}:`,
      onWarning: (w) => warnings.push(w),
    });
    await store.ready;
    // Assert
    expect(warnings).toEqual([]);
    await connection.close();
  });
});

describe('redis store against a server that is gone', () => {
  it('rejects every call with StoreUnavailableError within the timeout, never hanging', async () => {
    // Arrange: a connected client whose server then disappears for good.
    const [port] = await freePorts(PORT_SLICES.outage);
    const server = new PrivateRedis(port!);
    await server.start();
    const connection = await connectClient('node-redis', server.url);
    const store = redisStore({ client: connection.client, timeoutMs: 300 });
    await server.dispose();
    // Act
    const started = Date.now();
    const error = await store
      .claim('k', { fingerprint: 'fp', leaseMs: 1000 })
      .catch((e: unknown) => e);
    // Assert
    expect(isStoreUnavailableError(error)).toBe(true);
    expect(Date.now() - started).toBeLessThan(300 + 2000);
    await connection.close();
  });
});
