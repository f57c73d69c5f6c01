import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { redisStore } from '../../src/redis/index.js';
import { defineStoreSuite } from '../../src/testing/index.js';
import { env, requireService } from '../helpers/env.js';
import { connectCluster, type TestRedisClient } from '../helpers/redis-clients.js';
import { freePorts, LocalCluster, PORT_SLICES } from '../helpers/redis-servers.js';

// A local 3-master Redis Cluster, started here on private loopback ports and killed in afterAll.
const prefix = `idemtest:cl:${randomUUID().slice(0, 8)}:`;
let cluster: LocalCluster;
let nodeRedis: TestRedisClient;
let ioRedis: TestRedisClient;

beforeAll(async () => {
  await requireService('Redis', env.redisUrl);
  cluster = new LocalCluster(await freePorts(PORT_SLICES.cluster, 3));
  await cluster.start();
  nodeRedis = await connectCluster('node-redis', cluster.rootNodes);
  ioRedis = await connectCluster('ioredis', cluster.rootNodes);
}, 60_000);

afterAll(async () => {
  await nodeRedis?.close();
  await ioRedis?.close();
  await cluster?.dispose();
});

describe('redis store on a 3-master cluster', () => {
  it('spreads records over every master, so the suite below crosses slots and nodes', async () => {
    // Arrange
    const store = redisStore({ client: nodeRedis.client, prefix: `${prefix}spread:` });
    // Act
    for (let i = 0; i < 30; i++) {
      const claim = await store.claim(`key-${i}`, { fingerprint: 'fp', leaseMs: 60_000 });
      expect(claim.claimed).toBe(true);
    }
    // Assert: each master holds some of the records (no CROSSSLOT error was raised on the way).
    const perNode = await Promise.all(
      cluster.nodes.map(async (node) => {
        const out = spawnSync(
          'redis-cli',
          ['-p', String(node.port), '--scan', '--pattern', `${prefix}spread:*`],
          {
            encoding: 'utf8',
          },
        );
        return out.stdout.split('\n').filter(Boolean).length;
      }),
    );
    expect(perNode.every((count) => count > 0)).toBe(true);
    expect((await store.stats()).inProgress).toBe(30);
  });
});

describe.each(['node-redis', 'ioredis'] as const)('redis cluster batches (%s)', (lib) => {
  it('declares no batches, yet claims and completes a batch spread over every slot, in key order', async () => {
    // Arrange: one script cannot span slots, so the engine must not coalesce; claimMany still works.
    const client = lib === 'node-redis' ? nodeRedis.client : ioRedis.client;
    const store = redisStore({ client, prefix: `${prefix}batch:${lib}:` });
    const keys = Array.from({ length: 20 }, (_, i) => `key-${i}`);
    // Act
    const claims = await store.claimMany([
      ...keys.map((key) => ({ key, fingerprint: 'fp', leaseMs: 60_000 })),
      { key: 'key-0', fingerprint: 'other', leaseMs: 60_000 },
    ]);
    const completed = await store.completeMany(
      keys.map((key, i) => {
        const claim = claims[i];
        if (!claim?.claimed) throw new Error(`${key} not claimed`);
        return { key, token: claim.token, outcome: Buffer.from(key), retentionMs: 60_000 };
      }),
    );
    // Assert
    expect(store.capabilities.batch).toBe(false);
    expect(claims.slice(0, 20).every((claim) => claim.claimed)).toBe(true);
    const repeat = claims[20];
    expect(repeat?.claimed === false && repeat.record.fingerprint).toBe('fp');
    expect(completed).toEqual(keys.map(() => true));
    expect((await store.get('key-7'))?.status).toBe('completed');
  });
});

defineStoreSuite({
  name: 'redis cluster (node-redis)',
  storeClock: 'backend',
  // stats() SCANs the shared server's whole keyspace: leases longer than the default 250 ms keep the
  // time-based checks deterministic on a loaded machine.
  shortLeaseMs: 600,
  createStore: (checkPrefix) =>
    redisStore({ client: nodeRedis.client, prefix: `${prefix}nr:${checkPrefix}` }),
  crossProcess: {
    module: new URL('../helpers/redis-clients.ts', import.meta.url),
    // Resolved lazily: the ports are known only once beforeAll has started the cluster.
    get argument() {
      return { lib: 'node-redis', url: '', cluster: cluster.rootNodes, prefix: `${prefix}storm:` };
    },
    processes: 4,
    claimsPerProcess: 2000,
    keys: 200,
  },
});

defineStoreSuite({
  name: 'redis cluster (ioredis)',
  storeClock: 'backend',
  // stats() SCANs the shared server's whole keyspace: leases longer than the default 250 ms keep the
  // time-based checks deterministic on a loaded machine.
  shortLeaseMs: 600,
  // The same store and cluster as the node-redis suite above, whose storm covers the processes.
  crossProcess: false,
  createStore: (checkPrefix) =>
    redisStore({ client: ioRedis.client, prefix: `${prefix}io:${checkPrefix}` }),
});
