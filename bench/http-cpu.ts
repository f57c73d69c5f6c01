/**
 * CPU time per request of the HTTP layer: the server's own CPU (user + system, read with
 * `process.cpuUsage()` in the server process) divided by the requests it served, for a baseline server (no
 * idempotency) and the same server behind the idempotency layer on each store, measured side by side in
 * interleaved rounds. Unlike requests per second, CPU time per request barely moves when other processes
 * share the machine, so this is the figure to compare changes with.
 *
 * - S2: 0 ms handler, a unique key per request;
 * - S3: 0 ms handler, replays of 100 completed keys.
 *
 * The "ratio vs baseline" column is the baseline's CPU time divided by the row's: the throughput the row
 * would reach, relative to the baseline, on a CPU-bound server.
 *
 * Run: `npx tsx bench/http-cpu.ts`. Environment:
 * - ADAPTERS (default `express,fastify,hono`), STORES (default `memory,sqlite,redis,postgres`);
 * - REQUESTS per measurement (default 4000), ROUNDS (default 5, reported as the median, after two
 *   warm-up passes per server), CONNECTIONS
 *   (keep-alive connections of the load generator, default 50);
 * - COMPARE: `name=/abs/path/to/src,…` adds a row per store loading the library from another source tree
 *   (a snapshot of `src/`, for A/B measurements of a change);
 * - PROFILE=<dir> has every server write a V8 CPU profile (`<dir>/<adapter>-<store>/*.cpuprofile`, one per
 *   server started, its whole life) to open in Chrome DevTools;
 * - TSX=1 loads the TypeScript sources through tsx instead of compiling them first (see below);
 * - REDIS_URL, DATABASE_URL as in the tests.
 *
 * The tables are printed and, unless COMPARE, ADAPTERS or STORES is set, written to
 * `bench/results/http-cpu.md`.
 *
 * The library is compiled with `tsc` (no type check) into a temporary directory and the servers load that
 * JavaScript, as users run the published `dist/`. Through tsx, every closure the layer creates per request
 * also pays for esbuild's `keepNames` helper, which would overstate the cost of closures.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type BenchStores, cleanupBenchStores, prepareBenchStores } from './lib/bench-stores.js';
import { compareVariants, libraryBuilder, repoRoot } from './lib/build-lib.js';
import type { BenchCpuReport, BenchServerConfig } from './lib/http-server.js';
import { type BenchRow, median } from './lib/report.js';
import { ResultsFile } from './lib/results.js';
import { inRoundOrder, roundOrderNote } from './lib/round-order.js';

type Adapter = NonNullable<BenchServerConfig['adapter']>;
type StoreName = BenchServerConfig['store'];

const adapters = (process.env.ADAPTERS ?? 'express,fastify,hono').split(',') as Adapter[];
const stores = (process.env.STORES ?? 'memory,sqlite,redis,postgres').split(',') as StoreName[];
const requests = Number(process.env.REQUESTS ?? 4000);
const rounds = Number(process.env.ROUNDS ?? 5);
const connections = Number(process.env.CONNECTIONS ?? 50);
const compare = compareVariants();
const { buildDir, build } = libraryBuilder('ik-bench-http-cpu-build-');
// V8 CPU profiles of the servers (see profileArgs); a profiled run writes no results file.
const PROFILE = process.env.PROFILE;
const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const databaseUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const run = randomUUID().slice(0, 8);
const sqliteDir = mkdtempSync(join(tmpdir(), 'ik-bench-http-cpu-'));
const pgSchema = `ik_bench_http_cpu_${run}`;
const body = JSON.stringify({ amount: 4200, currency: 'EUR' });

const libraries = {
  main: build('main', join(repoRoot, 'src')),
  ...Object.fromEntries(compare.map((variant) => [variant.name, build(variant.name, variant.src)])),
} as Record<string, string>;

interface Server {
  port: number;
  child: ChildProcess;
  cpu(): Promise<NodeJS.CpuUsage>;
  stop(): void;
}

async function startServer(config: BenchServerConfig): Promise<Server> {
  const child = fork(fileURLToPath(new URL('./lib/http-server.ts', import.meta.url)), [], {
    execArgv: ['--import', 'tsx', ...profileArgs(config)],
    env: { ...process.env, IK_BENCH_HTTP: JSON.stringify(config) },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const port = await new Promise<number>((resolve, reject) => {
    child.once('message', (m: { port: number }) => resolve(m.port));
    child.once('exit', (code) => reject(new Error(`bench server exited (${code})`)));
  });
  return {
    port,
    child,
    cpu: () =>
      new Promise((resolve) => {
        child.once('message', (m: BenchCpuReport) => resolve(m.cpu));
        child.send('cpu');
      }),
    // A profiled server must exit on its own to write its profile: it does when the IPC channel closes.
    stop: () => (PROFILE === undefined ? child.kill('SIGKILL') : child.disconnect()),
  };
}

// With PROFILE, each server writes a V8 CPU profile of its whole life into `<PROFILE>/<adapter>-<store>`.
function profileArgs(config: BenchServerConfig): string[] {
  if (PROFILE === undefined) return [];
  const dir = join(PROFILE, `${config.adapter ?? 'express'}-${config.store}`);
  return ['--cpu-prof', `--cpu-prof-dir=${dir}`];
}

/** Send `count` requests over `connections` keep-alive connections; returns wall seconds. */
async function drive(port: number, count: number, keyOf: (n: number) => string): Promise<number> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: connections });
  let next = 0;
  let failed = 0;
  const one = (n: number) =>
    new Promise<void>((resolve, reject) => {
      const request = http.request(
        {
          host: '127.0.0.1',
          port,
          path: '/orders',
          method: 'POST',
          agent,
          headers: { 'content-type': 'application/json', 'idempotency-key': keyOf(n) },
        },
        (response) => {
          if (response.statusCode !== 201) failed++;
          response.resume();
          response.on('end', resolve);
        },
      );
      request.on('error', reject);
      request.end(body);
    });
  const lane = async () => {
    while (next < count) await one(next++);
  };
  const started = performance.now();
  await Promise.all(Array.from({ length: connections }, lane));
  const seconds = (performance.now() - started) / 1000;
  agent.destroy();
  if (failed > 0) throw new Error(`${failed} of ${count} requests did not answer 201`);
  return seconds;
}

const benchStores: BenchStores = {
  stores,
  databaseUrl,
  pgSchema,
  redisUrl,
  redisPrefix: `bench:http-cpu:${run}:`,
  tempDirs: [sqliteDir, buildDir],
};

const SCENARIOS = [
  { id: 'S2', title: 'S2: 0 ms handler, unique keys', replay: false },
  { id: 'S3', title: 'S3: 0 ms handler, replays of 100 completed keys', replay: true },
] as const;

interface Row {
  name: string;
  config: BenchServerConfig;
}

// Each variant gets a PostgreSQL schema of its own: a row that replays records another row stored (rather
// than records it completed itself) measured up to 1.5x faster on S3 in `bench/http.ts`, whatever its code.
const variantStores: BenchStores[] = compare.map((variant) => ({
  ...benchStores,
  stores: benchStores.stores.filter((store) => store === 'postgres'),
  pgSchema: `${pgSchema}_${variant.name}`,
  tempDirs: [],
}));
await prepareBenchStores(benchStores);
for (const variantStore of variantStores) await prepareBenchStores(variantStore);
const command = `npx tsx bench/http-cpu.ts${
  process.env.ADAPTERS || process.env.STORES || process.env.REQUESTS || process.env.ROUNDS
    ? ` (ADAPTERS=${adapters.join(',')} STORES=${stores.join(',')} REQUESTS=${requests} ROUNDS=${rounds})`
    : ''
}${roundOrderNote()}`;
const resultsFile = new ResultsFile('http-cpu');
try {
  for (const adapter of adapters) {
    for (const scenario of SCENARIOS) {
      const tag = `${adapter}-${scenario.id}`;
      const common = {
        adapter,
        delayMs: 0,
        sqliteFile: join(sqliteDir, `${tag}.db`),
        redisUrl,
        redisPrefix: `bench:http-cpu:${run}:${tag}:`,
        databaseUrl,
        pgSchema,
      };
      const rows: Row[] = [
        {
          name: 'baseline (no idempotency)',
          config: { ...common, store: 'none', src: libraries.main! },
        },
      ];
      for (const store of stores) {
        rows.push({
          name: `idempotency-kit, ${store}`,
          config: { ...common, store, src: libraries.main! },
        });
        for (const variant of compare) {
          rows.push({
            name: `idempotency-kit, ${store} [${variant.name}]`,
            config: {
              ...common,
              store,
              src: libraries[variant.name]!,
              sqliteFile: join(sqliteDir, `${tag}-${variant.name}.db`),
              redisPrefix: `bench:http-cpu:${run}:${tag}:${variant.name}:`,
              pgSchema: `${pgSchema}_${variant.name}`,
            },
          });
        }
      }
      const servers: Server[] = [];
      try {
        // Started one after another: a store's first connection is not what is measured.
        for (const row of rows) servers.push(await startServer(row.config));
        const prefix = `${tag}-${randomUUID()}`;
        for (const [index, server] of servers.entries()) {
          // Complete the 100 replayed keys (S3), then warm the JIT up, on keys of its own.
          if (scenario.replay) await drive(server.port, 100, (n) => `${prefix}-${n}`);
          await drive(server.port, Math.max(requests, 3000), (n) => `warm-${prefix}-${index}-${n}`);
        }
        const cpuUs = rows.map(() => [] as number[]);
        const rps = rows.map(() => [] as number[]);
        // Round -1 is a second warm-up, interleaved as the measured rounds are (the first measured round
        // otherwise still runs high), and is not recorded. Each round's order is rotated by one place
        // (see lib/round-order.ts).
        for (let round = -1; round < rounds; round++) {
          for (const [index, server] of inRoundOrder([...servers.entries()], round + 1)) {
            const keyOf = scenario.replay
              ? (n: number) => `${prefix}-${n % 100}`
              : (n: number) => `${prefix}-${round}-${index}-${n}`;
            const before = await server.cpu();
            const seconds = await drive(server.port, requests, keyOf);
            const after = await server.cpu();
            if (round < 0) continue;
            const used = after.user - before.user + (after.system - before.system);
            cpuUs[index]!.push(used / requests);
            rps[index]!.push(requests / seconds);
          }
        }
        const baseUs = median(cpuUs[0]!);
        const table: BenchRow[] = rows.map((row, index) => {
          const us = median(cpuUs[index]!);
          return {
            name: row.name,
            // Requests per CPU-second: the ratio column then reads as CPU-bound throughput vs baseline.
            opsPerSec: 1e6 / us,
            extra: {
              'CPU µs/req': us.toFixed(0),
              'overhead µs/req': index === 0 ? '–' : `+${(us - baseUs).toFixed(0)}`,
              'CPU µs/req, rounds': cpuUs[index]!.map((v) => v.toFixed(0)).join(' / '),
              'wall rps (noisy)': Math.round(median(rps[index]!)).toLocaleString('en-US'),
            },
          };
        });
        resultsFile.table(
          `HTTP CPU per request (${adapter}, ${connections} keep-alive connections; ops/s = requests per CPU-second): ${scenario.title}`,
          command,
          table,
          { chartTitle: `HTTP CPU-bound throughput, ${adapter}: ${scenario.title}` },
        );
      } finally {
        for (const server of servers) server.stop();
      }
    }
  }
} finally {
  await cleanupBenchStores(benchStores);
  for (const variantStore of variantStores) await cleanupBenchStores(variantStore);
}
// A run on a subset of adapters or stores would replace the full table with a partial one.
const subset = process.env.ADAPTERS !== undefined || process.env.STORES !== undefined;
if (compare.length === 0 && !subset && PROFILE === undefined) resultsFile.write();
process.exit(0);
