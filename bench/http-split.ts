/**
 * Where a request's CPU goes in S2 (0 ms handler, a unique key per request; Express, autocannon at 50
 * connections), split by process and thread: the server's main thread, all its threads (the difference is
 * mostly V8's garbage-collection helpers), its GC pauses, Redis, PostgreSQL and the load generator, plus
 * the server's write system calls, each per 2xx answer. Rows, measured in interleaved rounds: the baseline
 * (no idempotency), the floor (two Redis round trips per request and nothing else, as in `http.ts`), the
 * idempotency layer on each store, and peer libraries (as in `http-peers.ts`).
 *
 * `http.ts` says how far each row is from the baseline; this says why: what the layer costs over the floor
 * on the main thread (the resource S2 saturates), how much of it is collection, and what the stores cost
 * their servers on a machine whose 2 cores they share.
 *
 * Run: `npx tsx bench/http-split.ts` (Linux: reads `/proc`). Environment:
 * - DURATION seconds per measurement (default 3), ROUNDS (default 5, after one warm-up round; medians of
 *   the rounds' per-request figures);
 * - STORES (default `redis,postgres`), PEERS (default `node-idempotency`; empty for none);
 * - RATE: a fixed offered load in requests per second (say 3000) instead of as many as each server answers.
 *   At a fixed rate every row does the same work per second, so CPU per request compares rows without the
 *   noise of saturation; run it with `taskset` for steadier figures still (see bench/README.md);
 * - SURVIVORS=1: each server also samples the objects that outlive a scavenge (`lib/gc-probe.ts`), which
 *   adds a column of their bytes per request and prints, per row, the allocation sites they come from. A
 *   scavenge's pause grows with what it copies: this says whose objects those are (SURVIVOR_SITES sites per
 *   row, default 15). The sampling slows the servers, so such a run writes no results file;
 * - REDIS_URL, DATABASE_URL as in the tests.
 *
 * A run with the defaults (no STORES, PEERS or RATE) writes `bench/results/http-split.md`.
 */
import type { ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { type BenchStores, cleanupBenchStores, prepareBenchStores } from './lib/bench-stores.js';
import { libraryBuilder, repoRoot } from './lib/build-lib.js';
import type { GcProbeReport, SurvivorTotals } from './lib/gc-probe.js';
import { load } from './lib/http-load.js';
import type { BenchServerConfig } from './lib/http-server.js';
import { allThreadsCpu, cpuSince, ownCpu, processCpuByPid, threadCpu } from './lib/proc-cpu.js';
import { type BenchRow, median } from './lib/report.js';
import { ResultsFile } from './lib/results.js';
import { type ServerChild, startServerChild } from './lib/server-child.js';
import { PEER_LABELS, type PeerName, type PeerServerConfig } from './peers/types.js';

const duration = Number(process.env.DURATION ?? 3);
const rounds = Number(process.env.ROUNDS ?? 5);
const stores = (process.env.STORES ?? 'redis,postgres').split(',').filter(Boolean) as Array<
  'memory' | 'sqlite' | 'redis' | 'postgres'
>;
const peers = (process.env.PEERS ?? 'node-idempotency').split(',').filter(Boolean) as PeerName[];
const rate = process.env.RATE === undefined ? undefined : Number(process.env.RATE);
const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const databaseUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const run = randomUUID().slice(0, 8);
const kitPrefix = `bench:http-split:${run}:`;
const peersDb = 9;
const peersPrefix = `ikpeers-split-${run}-`;
const pgSchema = `ik_bench_http_split_${run}`;
const { buildDir, build } = libraryBuilder('ik-bench-http-split-build-');
const library = build('main', join(repoRoot, 'src'));
const gcProbe = new URL('./lib/gc-probe.ts', import.meta.url).href;
const survivors = process.env.SURVIVORS === '1';
// Sites printed per row with SURVIVORS=1.
const SURVIVOR_SITES = Number(process.env.SURVIVOR_SITES ?? 15);

/** One row: its name and how to start its server. */
interface Row {
  name: string;
  script: string;
  env: Record<string, string>;
}

const peersRedisUrl = (() => {
  const url = new URL(redisUrl);
  url.pathname = `/${peersDb}`;
  return url.toString();
})();

function serverRow(name: string, config: BenchServerConfig): Row {
  return { name, script: './lib/http-server.ts', env: { IK_BENCH_HTTP: JSON.stringify(config) } };
}

const ROWS: Row[] = [
  serverRow('baseline (no idempotency)', { store: 'none', delayMs: 0 }),
  serverRow('floor: no idempotency, 2 Redis round trips', {
    store: 'redis-floor',
    delayMs: 0,
    redisUrl,
  }),
  ...stores.map((store) =>
    serverRow(`idempotency-kit, ${store}`, {
      store,
      delayMs: 0,
      redisUrl,
      redisPrefix: kitPrefix,
      databaseUrl,
      pgSchema,
      sqliteFile: join(buildDir, `split-${run}.db`),
      src: library,
    }),
  ),
  ...peers.map(
    (peer): Row => ({
      name: PEER_LABELS[peer],
      script: './peers/server.ts',
      env: {
        IK_BENCH_PEER: JSON.stringify({
          peer,
          delayMs: 0,
          redisUrl: peersRedisUrl,
          keyPrefix: peersPrefix,
        } satisfies PeerServerConfig),
      },
    }),
  ),
];

function start(row: Row): Promise<ServerChild> {
  const env = survivors ? { ...row.env, IK_BENCH_SURVIVORS: '1' } : row.env;
  return startServerChild(new URL(row.script, import.meta.url), env, ['--import', gcProbe]);
}

function writeSyscalls(pid: number): number {
  return Number(/syscw: (\d+)/.exec(readFileSync(`/proc/${pid}/io`, 'utf8'))?.[1] ?? 0);
}

function gcTotals(child: ChildProcess): Promise<GcProbeReport> {
  return new Promise((resolve) => {
    const onMessage = (message: Partial<GcProbeReport>) => {
      if (message.gc === undefined) return;
      child.off('message', onMessage);
      resolve(message as GcProbeReport);
    };
    child.on('message', onMessage);
    child.send('gc');
  });
}

/** Everything read before and after a measurement. */
interface Reading {
  main: number;
  all: number;
  redis: Map<number, number>;
  postgres: Map<number, number>;
  loadgen: number;
  writes: number;
  gc: GcProbeReport['gc'];
  survivors: SurvivorTotals | undefined;
}

async function read(server: ServerChild): Promise<Reading> {
  const pid = server.child.pid!;
  const probe = await gcTotals(server.child);
  return {
    main: threadCpu(pid, pid),
    all: allThreadsCpu(pid),
    redis: processCpuByPid(['redis-server']),
    postgres: processCpuByPid(['postgres']),
    loadgen: ownCpu(),
    writes: writeSyscalls(pid),
    gc: probe.gc,
    survivors: probe.survivors,
  };
}

/** Per-request figures of one measurement. */
interface Split {
  okRps: number;
  main: number;
  all: number;
  gcPause: number;
  scavenges: number;
  redis: number;
  postgres: number;
  loadgen: number;
  writes: number;
  survivedBytes: number;
}

/** Per-request bytes of each allocation site's survivors between two readings, largest first. */
function survivorSites(from: SurvivorTotals, to: SurvivorTotals, requests: number) {
  return Object.entries(to.sites)
    .map(([site, bytes]) => [site, (bytes - (from.sites[site] ?? 0)) / requests] as const)
    .filter(([, bytes]) => bytes > 0)
    .sort((a, b) => b[1] - a[1]);
}

const command = `DURATION=${duration} ROUNDS=${rounds}${
  process.env.STORES === undefined ? '' : ` STORES=${process.env.STORES}`
}${process.env.PEERS === undefined ? '' : ` PEERS=${process.env.PEERS}`}${
  rate === undefined ? '' : ` RATE=${rate}`
} npx tsx bench/http-split.ts`;
const full =
  process.env.STORES === undefined &&
  process.env.PEERS === undefined &&
  rate === undefined &&
  !survivors;
const benchStores: BenchStores = {
  stores: [...stores, 'redis'],
  databaseUrl,
  pgSchema,
  redisUrl,
  redisPrefix: kitPrefix,
  tempDirs: [buildDir],
};
await prepareBenchStores(benchStores);
const servers: ServerChild[] = [];
try {
  for (const row of ROWS) servers.push(await start(row));
  const splits = ROWS.map(() => [] as Split[]);
  // Each row's survivor totals at the start of its first recorded round, and its requests since.
  const survivorsFrom: Array<SurvivorTotals | undefined> = ROWS.map(() => undefined);
  const survivorsTo: Array<SurvivorTotals | undefined> = ROWS.map(() => undefined);
  const survivorRequests = ROWS.map(() => 0);
  let n = 0;
  // Round 0 warms every server up (V8 optimises the hot paths) and is not recorded.
  for (let round = 0; round <= rounds; round++) {
    for (const [index, server] of servers.entries()) {
      const before = await read(server);
      const result = await load(server.url, duration, () => `split-${run}-${n++}`, rate);
      const after = await read(server);
      if (round === 0) continue;
      const ok = Math.max(1, result.ok);
      const us = (key: 'main' | 'all' | 'loadgen') => ((after[key] - before[key]) / ok) * 1e6;
      const serverUs = (key: 'redis' | 'postgres') =>
        (cpuSince(before[key], after[key]) / ok) * 1e6;
      const requests = Math.max(1, after.gc.requests - before.gc.requests);
      survivorsFrom[index] ??= before.survivors;
      survivorsTo[index] = after.survivors;
      survivorRequests[index]! += requests;
      splits[index]!.push({
        okRps: result.okRps,
        main: us('main'),
        all: us('all'),
        gcPause:
          ((after.gc.minorMs + after.gc.majorMs - before.gc.minorMs - before.gc.majorMs) /
            requests) *
          1000,
        scavenges: ((after.gc.minor - before.gc.minor) / requests) * 1000,
        redis: serverUs('redis'),
        postgres: serverUs('postgres'),
        loadgen: us('loadgen'),
        writes: (after.writes - before.writes) / ok,
        survivedBytes: ((after.survivors?.bytes ?? 0) - (before.survivors?.bytes ?? 0)) / requests,
      });
    }
  }
  const rows: BenchRow[] = ROWS.map((row, index) => {
    const runs = splits[index]!;
    const mid = (pick: (split: Split) => number, digits = 1) =>
      median(runs.map(pick)).toFixed(digits);
    return {
      name: row.name,
      opsPerSec: median(runs.map((split) => split.okRps)),
      extra: {
        'main thread µs/req': mid((s) => s.main),
        'all threads µs/req': mid((s) => s.all),
        'GC pause µs/req': mid((s) => s.gcPause),
        'scavenges/1000 req': mid((s) => s.scavenges, 2),
        'redis µs/req': mid((s) => s.redis),
        'postgres µs/req': mid((s) => s.postgres),
        'load generator µs/req': mid((s) => s.loadgen),
        'server writes/req': mid((s) => s.writes, 2),
        ...(survivors ? { 'survived scavenge B/req': mid((s) => s.survivedBytes, 0) } : {}),
      },
    };
  });
  const results = new ResultsFile('http-split');
  results.table(
    `HTTP S2 CPU split (Express, autocannon, 50 connections${rate === undefined ? '' : `, ${rate} req/s offered`}; medians of ${rounds} rounds, per 2xx answer)`,
    command,
    rows,
    { chartTitle: 'HTTP S2: 2xx/s as a share of the baseline' },
  );
  if (full) results.write();
  if (survivors) {
    for (const [index, row] of ROWS.entries()) {
      const from = survivorsFrom[index];
      const to = survivorsTo[index];
      if (from === undefined || to === undefined) continue;
      console.log(
        `\nObjects outliving a scavenge, bytes per request by allocation site: ${row.name}`,
      );
      for (const [site, bytes] of survivorSites(from, to, survivorRequests[index]!).slice(
        0,
        SURVIVOR_SITES,
      )) {
        console.log(`${bytes.toFixed(0).padStart(7)}  ${site}`);
      }
    }
  }
} finally {
  for (const server of servers) server.child.kill('SIGKILL');
  await cleanupBenchStores(benchStores);
  await cleanupBenchStores({
    stores: ['redis'],
    databaseUrl: '',
    pgSchema: '',
    redisUrl: peersRedisUrl,
    redisPrefix: peersPrefix,
    tempDirs: [],
  });
}
