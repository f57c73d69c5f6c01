/**
 * The cost of `waitForReplicas`: the Redis store with and without it, against a primary with one replica
 * that this script starts itself (two private `redis-server`s on free loopback ports, no persistence),
 * rounds interleaved in the same run. Rows, for each client library: claim + complete pairs as single calls
 * (one script call each, plus one `WAIT` each with the option), and the engine's `run()` with its default
 * batching (a batch shares one `WAIT`), 50 concurrent callers. The ratio column of each `WAIT` row is its
 * same-round ratio to the row without the option just above it.
 *
 * Run: `npx tsx bench/redis-replicas.ts` (PAIRS, default 10000; ROUNDS, default 3). Needs `redis-server`.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { createIdempotency } from '../src/index.js';
import { type RedisClientLike, type RedisStoreOptions, redisStore } from '../src/redis/index.js';
import { type BenchRow, median, roundColumns, throughput } from './lib/report.js';
import { ResultsFile } from './lib/results.js';

const pairs = Number(process.env.PAIRS ?? 10_000);
const rounds = Number(process.env.ROUNDS ?? 3);
const concurrency = 50;
const outcome = Buffer.from(JSON.stringify({ status: 201, body: { id: 'ord_123', total: 4200 } }));
const waitForReplicas = { count: 1, timeoutMs: 1000 };

/** A free loopback port, as the OS hands one out. */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => resolve(typeof address === 'object' && address ? address.port : 0));
    });
  });
}

function startServer(port: number, dir: string, extra: string[] = []): ChildProcess {
  return spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'].concat(
      ['--dir', dir, '--daemonize', 'no', '--logfile', join(dir, `${port}.log`)],
      extra,
    ),
    { stdio: 'ignore' },
  );
}

async function replicaOnline(admin: Redis): Promise<void> {
  for (let i = 0; i < 400; i++) {
    if (/slave0:.*state=online/.test(await admin.info('replication').catch(() => ''))) return;
    await sleep(50);
  }
  throw new Error('the replica never came online');
}

async function measure(lib: string, client: RedisClientLike): Promise<BenchRow[]> {
  let round = 0;
  const base: RedisStoreOptions = { client, timeoutMs: 5000, checkEvictionPolicy: false };
  const stores = {
    plain: redisStore({ ...base, prefix: `bench:${lib}:plain:` }),
    waiting: redisStore({ ...base, prefix: `bench:${lib}:wait:`, waitForReplicas }),
  };
  const singlePairs = (store: ReturnType<typeof redisStore>) => () => {
    const tag = `${round++}:`;
    return throughput(pairs, concurrency, async (i) => {
      const claim = await store.claim(`${tag}${i}`, { fingerprint: 'fp', leaseMs: 60_000 });
      if (!claim.claimed) throw new Error('bench keys are unique: every claim must win');
      await store.complete(`${tag}${i}`, claim.token, outcome, 60_000);
    });
  };
  const engineRuns = (store: ReturnType<typeof redisStore>) => () => {
    const idempotency = createIdempotency({ store, namespace: `r${round++}`, retentionMs: '1m' });
    return throughput(pairs, concurrency, async (i) => {
      const result = await idempotency.run({ key: `k${i}` }, () => i);
      if (result.status !== 'executed')
        throw new Error('bench keys are unique: every run executes');
    });
  };
  const cases: Array<[string, () => Promise<number>]> = [
    [`${lib}: claim + complete, single calls`, singlePairs(stores.plain)],
    [`${lib}: claim + complete, single calls, waitForReplicas`, singlePairs(stores.waiting)],
    [`${lib}: engine run(), batched (default)`, engineRuns(stores.plain)],
    [`${lib}: engine run(), batched, waitForReplicas`, engineRuns(stores.waiting)],
  ];
  for (const [, once] of cases) await once();
  const rates = cases.map((): number[] => []);
  for (let r = 0; r < rounds; r++) {
    for (const [c, [, once]] of cases.entries()) rates[c]?.push(await once());
  }
  return cases.map(([name], c) => {
    // Each WAIT row against the row without the option just above it, round by round.
    const baseline = rates[c % 2 === 1 ? c - 1 : c] ?? [];
    return {
      name,
      opsPerSec: median(rates[c] ?? []),
      extra: roundColumns(rates[c] ?? [], baseline),
    };
  });
}

const dir = mkdtempSync(join(tmpdir(), 'idem-bench-replicas-'));
const primaryPort = await freePort();
const replicaPort = await freePort();
const servers = [
  startServer(primaryPort, dir),
  startServer(replicaPort, dir, ['--replicaof', '127.0.0.1', String(primaryPort)]),
];
try {
  await sleep(300);
  const admin = new Redis(primaryPort, '127.0.0.1');
  await replicaOnline(admin);
  admin.disconnect();
  const url = `redis://127.0.0.1:${primaryPort}`;
  const results = new ResultsFile('redis-replicas');
  const command = 'npx tsx bench/redis-replicas.ts';
  const title = (lib: string) =>
    `Redis store with and without waitForReplicas { count: 1 } (one local replica), ${lib}, ${pairs} pairs × ${rounds} rounds, ${concurrency} concurrent (pairs/s, median)`;
  const nodeRedis = await createClient({ url }).connect();
  results.table(title('node-redis'), command, await measure('node-redis', nodeRedis));
  nodeRedis.destroy();
  const ioRedis = new Redis(url);
  ioRedis.on('error', (error) => console.error(error));
  results.table(title('ioredis'), command, await measure('ioredis', ioRedis));
  ioRedis.disconnect();
  results.write();
} finally {
  for (const server of servers) server.kill('SIGKILL');
  await sleep(200);
  rmSync(dir, { recursive: true, force: true });
}
