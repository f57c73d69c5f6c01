/**
 * HTTP overhead of the Express middleware: autocannon at 50 connections against a baseline Express app (no
 * idempotency) and the same app behind `idempotency()` on each store, measured side by side in one run.
 *
 * - S1: 50 ms handler, a unique key per request;
 * - S2: 0 ms handler, a unique key per request;
 * - S3: 0 ms handler, replays of 100 completed keys.
 *
 * With Redis among the stores, a floor row measures the baseline plus two Redis round trips per request
 * (before the handler, and before the response is released): what a claim and a completion cost at the
 * least, whatever the layer does around them.
 *
 * Run: `npx tsx bench/http.ts` (DURATION seconds per measurement, default 3; ROUNDS, default 3, interleaved
 * and reported as the median; ONLY, a comma-separated list of scenario ids such as `S1,S3`, measures only
 * those and does not write the results file; STORES, default
 * `memory,sqlite,redis,postgres`; REDIS_URL and DATABASE_URL as in the tests). Each server runs in its own
 * child process; the Markdown table is printed and written to `bench/results/http.md`.
 *
 * The servers load the library compiled with `tsc` into a temporary directory, as users run the published
 * `dist/` (see `lib/build-lib.ts`); TSX=1 loads the TypeScript sources through tsx instead. COMPARE
 * (`name=/abs/path/to/src,…`) adds a row per store loading the library from another source tree (a
 * snapshot of `src/`, for before/after figures of a change in one run); the results file is then not
 * written. PG_AT=<n> adds a PostgreSQL row on a schema migrated only up to migration n (a later
 * migration's effect in the same run; `PG_AT=6`: 0007, batch functions planned once per connection); the
 * results file is then not written either.
 */
import { fork } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  type BenchStores,
  cleanupBenchStores,
  pgAtVersion,
  prepareBenchStores,
  schemaAtLabel,
} from './lib/bench-stores.js';
import { compareVariants, libraryBuilder, repoRoot } from './lib/build-lib.js';
import { load, ORDER_BODY, selectedScenarios } from './lib/http-load.js';
import type { BenchServerConfig } from './lib/http-server.js';
import { type BenchRow, median, roundColumns } from './lib/report.js';
import { ResultsFile } from './lib/results.js';
import { inRoundOrder, roundOrderNote } from './lib/round-order.js';

const duration = Number(process.env.DURATION ?? 3);
const rounds = Number(process.env.ROUNDS ?? 3);
const { scenarios, partial } = selectedScenarios();
const stores = (process.env.STORES ?? 'memory,sqlite,redis,postgres').split(',') as Array<
  BenchServerConfig['store']
>;
const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const databaseUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const run = randomUUID().slice(0, 8);
const sqliteDir = mkdtempSync(join(tmpdir(), 'ik-bench-http-'));
const pgSchema = `ik_bench_http_${run}`;
const { useTsx, buildDir, build } = libraryBuilder('ik-bench-http-build-');
const compare = compareVariants();
const library = build('main', join(repoRoot, 'src'));
const variants = compare.map((variant) => ({
  ...variant,
  library: build(variant.name, variant.src),
}));

async function startServer(config: BenchServerConfig) {
  const child = fork(fileURLToPath(new URL('./lib/http-server.ts', import.meta.url)), [], {
    execArgv: ['--import', 'tsx'],
    env: { ...process.env, IK_BENCH_HTTP: JSON.stringify(config) },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const port = await new Promise<number>((resolve, reject) => {
    child.once('message', (m: { port: number }) => resolve(m.port));
    child.once('exit', (code) => reject(new Error(`bench server exited (${code})`)));
  });
  return { url: `http://127.0.0.1:${port}/orders`, stop: () => child.kill('SIGKILL') };
}

const benchStores: BenchStores = {
  stores,
  databaseUrl,
  pgSchema,
  redisUrl,
  redisPrefix: `bench:http:${run}:`,
  tempDirs: [sqliteDir, buildDir],
};

// Each variant gets a PostgreSQL schema of its own: a row that replays records another row stored (rather
// than records it completed itself) measured up to 1.5x faster on S3, whatever its code.
const variantStores: BenchStores[] = variants.map((variant) => ({
  ...benchStores,
  stores: benchStores.stores.filter((store) => store === 'postgres'),
  pgSchema: `${pgSchema}_${variant.name}`,
  tempDirs: [],
}));
// PG_AT=n: one more schema, for the row that runs on a schema stopping at migration n.
const pgAt = pgAtVersion();
if (pgAt !== undefined && stores.includes('postgres')) {
  variantStores.push({
    ...benchStores,
    stores: ['postgres'],
    pgSchema: `${pgSchema}_at${pgAt}`,
    tempDirs: [],
    migrateTo: pgAt,
  });
}
await prepareBenchStores(benchStores);
for (const variantStore of variantStores) await prepareBenchStores(variantStore);
const command = `DURATION=${duration} ROUNDS=${rounds}${roundOrderNote()}${useTsx ? ' TSX=1' : ''}${
  pgAt === undefined ? '' : ` PG_AT=${pgAt}`
}${
  compare.length > 0 ? ` COMPARE=${compare.map((variant) => variant.name).join(',')}` : ''
} npx tsx bench/http.ts`;
const resultsFile = new ResultsFile('http');

interface Row {
  name: string;
  store: BenchServerConfig['store'];
  src: string;
  /** Tells apart the SQLite files and Redis prefixes of variants. */
  tag: string;
  pgSchema: string;
}
const rows: Row[] = [
  { name: 'baseline (no idempotency)', store: 'none', src: library, tag: '', pgSchema },
];
for (const store of stores) {
  rows.push({ name: `idempotency-kit, ${store}`, store, src: library, tag: '', pgSchema });
  for (const variant of variants) {
    rows.push({
      name: `idempotency-kit, ${store} [${variant.name}]`,
      store,
      src: variant.library,
      tag: `-${variant.name}`,
      pgSchema: `${pgSchema}_${variant.name}`,
    });
  }
  if (store === 'postgres' && pgAt !== undefined) {
    rows.push({
      name: `idempotency-kit, postgres, ${schemaAtLabel(pgAt)}`,
      store,
      src: library,
      tag: `-at${pgAt}`,
      pgSchema: `${pgSchema}_at${pgAt}`,
    });
  }
}

// The floor: no idempotency layer, only the two Redis round trips a claim and a completion make (see
// `redis-floor` in lib/http-server.ts). No layer that claims before the handler and stores the response
// before sending it can beat this row; the distance between it and the Redis row is the layer's own cost.
if (stores.includes('redis')) {
  rows.push({
    name: 'floor: no idempotency, 2 Redis round trips',
    store: 'redis-floor',
    src: library,
    tag: '',
    pgSchema,
  });
}

try {
  for (const scenario of scenarios) {
    // A replay needs one round trip at most (none from the engine's local cache): no floor for S3.
    const scenarioRows = rows.filter((row) => !(scenario.replay && row.store === 'redis-floor'));
    // One server per row for the whole scenario; rows are measured in interleaved rounds so that the
    // drift of a shared, noisy machine hits every row alike, each round in an order rotated by one place
    // (see lib/round-order.ts). Each row reports the median of its rounds.
    const servers = await Promise.all(
      scenarioRows.map((row) =>
        startServer({
          store: row.store,
          src: row.src,
          delayMs: scenario.delayMs,
          sqliteFile: join(sqliteDir, `${scenario.id}${row.tag}.db`),
          redisUrl,
          redisPrefix: `bench:http:${run}:${scenario.id}${row.tag}:`,
          databaseUrl,
          pgSchema: row.pgSchema,
        }),
      ),
    );
    const results = scenarioRows.map(() => [] as Array<Awaited<ReturnType<typeof load>>>);
    try {
      const prefix = `${scenario.id}-${randomUUID()}`;
      for (const [index, server] of servers.entries()) {
        if (scenario.replay && scenarioRows[index]!.store !== 'none') {
          // Complete the 100 keys first, so the measured runs only replay.
          for (let i = 0; i < 100; i++) {
            await fetch(server.url, {
              method: 'POST',
              headers: { 'content-type': 'application/json', 'idempotency-key': `${prefix}-${i}` },
              body: ORDER_BODY,
            });
          }
        }
        // Keys of its own for each row, so that every row warms up on the same work.
        await load(server.url, 1, (n) => `warm-${prefix}-${index}-${n}`);
      }
      for (let round = 0; round < rounds; round++) {
        for (const [index, server] of inRoundOrder([...servers.entries()], round)) {
          // The baseline gets the same headers (and the same client-side work); it just ignores them.
          const keyOf = scenario.replay
            ? (n: number) => `${prefix}-${n % 100}`
            : (n: number) => `${prefix}-${round}-${index}-${n}`;
          results[index]!.push(await load(server.url, duration, keyOf));
        }
      }
    } finally {
      for (const server of servers) server.stop();
    }
    const table: BenchRow[] = scenarioRows.map((row, index) => {
      const runs = results[index]!;
      const rps = runs.map((r) => r.rps);
      const mid = runs[rps.indexOf(median(rps))] ?? runs[0]!;
      return {
        name: row.name,
        opsPerSec: median(rps),
        extra: {
          ...roundColumns(
            rps,
            results[0]!.map((r) => r.rps),
          ),
          'p50 ms': String(mid.p50),
          'p99 ms': String(mid.p99),
          'non-2xx/errors': String(runs.reduce((sum, r) => sum + r.bad, 0)),
          'non-2xx statuses': [...new Set(runs.flatMap((r) => r.statuses))].join(' ') || '–',
        },
      };
    });
    resultsFile.table(
      `HTTP (Express, autocannon, 50 connections): ${scenario.title}`,
      command,
      table,
      {
        chartTitle: `HTTP, Express: ${scenario.title}`,
        targets: [...scenario.targets],
      },
    );
  }
} finally {
  await cleanupBenchStores(benchStores);
  for (const variantStore of variantStores) await cleanupBenchStores(variantStore);
}
if (compare.length === 0 && pgAt === undefined && !partial) resultsFile.write();
process.exit(0);
