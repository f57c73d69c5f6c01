/**
 * The CLI's Redis store through either client library (`--redis-client node-redis|ioredis`), on one server
 * and on a local 3-master Redis Cluster (`--redis-cluster`, found from one node's URL): `inspect`, `stats`
 * and `list --crashed` see the same crashed requests whichever library reads them, and on a Cluster they
 * walk every master, not only the one the URL names.
 *
 * The CLI runs from a bundle (no tsx at each start), and a scenario's runs, which only read, start
 * together.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { redisStore } from '../../../src/redis/index.js';
import { bundledCli as cli } from '../../helpers/bundled-cli.js';
import { crashAfterCharge } from '../../helpers/crashed-request.js';
import { env, requireService } from '../../helpers/env.js';
import {
  connectClient,
  connectCluster,
  deleteKeys,
  type TestRedisClient,
} from '../../helpers/redis-clients.js';
import { freePorts, LocalCluster, PORT_SLICES } from '../../helpers/redis-servers.js';

const LIBRARIES = ['node-redis', 'ioredis'] as const;
const prefix = `ik-test:cli-clients:${randomUUID().slice(0, 8)}:`;
let single: TestRedisClient;
let cluster: LocalCluster;
let clustered: TestRedisClient;

beforeAll(async () => {
  await requireService('Redis', env.redisUrl);
  single = await connectClient('node-redis', env.redisUrl);
  cluster = new LocalCluster(await freePorts(PORT_SLICES.cliCluster, 3));
  await cluster.start();
  clustered = await connectCluster('node-redis', cluster.rootNodes);
}, 60_000);

afterAll(async () => {
  if (single !== undefined) {
    await deleteKeys(single.client, prefix);
    await single.close();
  }
  await clustered?.close();
  await cluster?.dispose();
});

/** The storage keys a `list --crashed --json` run printed. */
function listedKeys(stdout: string): string[] {
  const report = JSON.parse(stdout) as { keys: Array<{ storageKey: string; state: string }> };
  for (const key of report.keys) expect(key.state).toBe('crashed');
  return report.keys.map((key) => key.storageKey).sort();
}

describe('the CLI on one Redis server', () => {
  it.each(LIBRARIES)('reads crashed requests through %s', async (library) => {
    const store = redisStore({ client: single.client, prefix: `${prefix}${library}:` });
    const crashed = await crashAfterCharge(store);
    const args = ['--redis-url', env.redisUrl, '--prefix', `${prefix}${library}:`];
    // Both runs only read: they start together.
    const [inspected, listed] = await Promise.all([
      cli(['inspect', crashed.storageKey, ...args, '--redis-client', library]),
      cli(['list', '--crashed', '--json', ...args, '--redis-client', library]),
    ]);
    expect(inspected, inspected.stderr).toMatchObject({ code: 0, stderr: '' });
    expect(inspected.stdout).toMatch(new RegExp(`^${crashed.storageKey}: crashed$`, 'm'));
    expect(listed, listed.stderr).toMatchObject({ code: 0, stderr: '' });
    expect(listedKeys(listed.stdout)).toEqual([crashed.storageKey]);
  });
});

describe('the CLI on a Redis Cluster', () => {
  it.each(LIBRARIES)(
    'finds every master from one node and lists the crashed requests of all of them, through %s',
    async (library) => {
      // Arrange: crashed requests whose keys fall on different masters (hash slots spread them).
      const clusterPrefix = `${prefix}cluster-${library}:`;
      const store = redisStore({ client: clustered.client, prefix: clusterPrefix });
      const crashed = await Promise.all(Array.from({ length: 6 }, () => crashAfterCharge(store)));
      const keys = crashed.map((c) => c.storageKey).sort();
      const [firstPort] = cluster.ports;
      const args = [
        '--redis-url',
        `redis://127.0.0.1:${firstPort}`,
        '--redis-cluster',
        '--prefix',
        clusterPrefix,
        '--redis-client',
        library,
      ];

      // Act: every run only reads, so they start together.
      const [listed, stats, ...inspected] = await Promise.all([
        cli(['list', '--crashed', '--json', ...args]),
        cli(['stats', '--json', ...args]),
        ...crashed.map(({ storageKey }) => cli(['inspect', storageKey, ...args])),
      ]);

      // Assert: every key, whichever master holds it.
      expect(listed, listed.stderr).toMatchObject({ code: 0, stderr: '' });
      expect(listedKeys(listed.stdout)).toEqual(keys);
      expect(stats, stats.stderr).toMatchObject({ code: 0, stderr: '' });
      expect(JSON.parse(stats.stdout)).toMatchObject({ staleLeases: 6, completed: 0 });
      for (const [i, { storageKey }] of crashed.entries()) {
        expect(inspected[i]?.stdout).toMatch(new RegExp(`^${storageKey}: crashed$`, 'm'));
      }
    },
  );

  it('says why when --redis-cluster is missing and a key lives on another master', async () => {
    const clusterPrefix = `${prefix}no-flag:`;
    const store = redisStore({ client: clustered.client, prefix: clusterPrefix });
    // Twelve keys: the chance that all hash to the named node's slots (a third of them) is 2 in a million.
    const crashed = await Promise.all(Array.from({ length: 12 }, () => crashAfterCharge(store)));
    const [firstPort] = cluster.ports;
    const runs = await Promise.all(
      crashed.map(({ storageKey }) =>
        cli([
          'inspect',
          storageKey,
          '--redis-url',
          `redis://127.0.0.1:${firstPort}`,
          '--prefix',
          clusterPrefix,
        ]),
      ),
    );
    // Keys on the named node are read; the others fail (exit 1) with Redis's redirection and the fix,
    // never with a wrong answer such as "absent".
    for (const [i, run] of runs.entries()) {
      if (run.code === 0) {
        expect(run.stdout).toMatch(new RegExp(`^${crashed[i]?.storageKey}: crashed$`, 'm'));
        continue;
      }
      expect(run.code).toBe(1);
      expect(run.stderr).toMatch(/MOVED/);
      expect(run.stderr).toMatch(/add --redis-cluster to reach every node/);
    }
    expect(runs.filter((run) => run.code !== 0).length).toBeGreaterThan(0);
  });
});
