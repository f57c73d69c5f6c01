/**
 * Where S1's time goes: for each row of `http.ts`'s S1 (50 ms handler, a unique key per request; Express,
 * autocannon at 50 connections), how long a request waits between its arrival and its handler's start (the
 * claim), how long its handler runs, and how long it waits between the handler's answer and the response's
 * `finish` (the completion), as p50 / p90 over every request of the measured rounds, beside its share of the
 * baseline's requests/s.
 *
 * `http.ts` shows that S1 stays below 99% of the baseline on Redis and PostgreSQL, and that two bare Redis
 * round trips (the floor row) already do; this says why. A round trip is not the ~50 µs the wire takes: the
 * connections answer in step (their 50 ms timers fire in the same millisecond), so requests arrive in
 * bursts, and a store's answer is read only once the event loop has parsed the rest of the burst. A store
 * that answers in the same turn (memory, SQLite) does not wait for it.
 *
 * Run: `npx tsx bench/http-phases.ts` (DURATION seconds per measurement, default 3; ROUNDS, default 3,
 * interleaved and rotated as in `http.ts`; STORES, default `memory,sqlite,redis,postgres`; DELAY_MS, the
 * handler's delay, default 50 (S1); REDIS_URL and DATABASE_URL as in the tests). A run with the defaults
 * writes `bench/results/http-phases.md`.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type BenchStores, cleanupBenchStores, prepareBenchStores } from './lib/bench-stores.js';
import { libraryBuilder, repoRoot } from './lib/build-lib.js';
import { type LoadResult, load } from './lib/http-load.js';
import type { BenchPhasesReport, BenchServerConfig } from './lib/http-server.js';
import { type BenchRow, median, roundColumns } from './lib/report.js';
import { ResultsFile } from './lib/results.js';
import { inRoundOrder, roundOrderNote } from './lib/round-order.js';
import { type ServerChild, startServerChild } from './lib/server-child.js';

const duration = Number(process.env.DURATION ?? 3);
const rounds = Number(process.env.ROUNDS ?? 3);
const delayMs = Number(process.env.DELAY_MS ?? 50);
const stores = (process.env.STORES ?? 'memory,sqlite,redis,postgres').split(',') as Array<
  BenchServerConfig['store']
>;
const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const databaseUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const run = randomUUID().slice(0, 8);
const sqliteDir = mkdtempSync(join(tmpdir(), 'ik-bench-http-phases-'));
const pgSchema = `ik_bench_http_phases_${run}`;
const { useTsx, buildDir, build } = libraryBuilder('ik-bench-http-phases-build-');
const library = build('main', join(repoRoot, 'src'));
const defaults = ['DURATION', 'ROUNDS', 'STORES', 'DELAY_MS'].every((name) => !process.env[name]);

/** A server child of `lib/http-server.ts` with its phase clock on. */
function startServer(config: BenchServerConfig): Promise<ServerChild> {
  return startServerChild(new URL('./lib/http-server.ts', import.meta.url), {
    IK_BENCH_HTTP: JSON.stringify({ ...config, phases: true }),
  });
}

/** The phase times the server gathered since it was last asked (and forgets them). */
function takePhases(server: ServerChild): Promise<BenchPhasesReport['phases']> {
  return new Promise((resolve) => {
    const onMessage = (message: Partial<BenchPhasesReport>) => {
      if (message.phases === undefined) return;
      server.child.off('message', onMessage);
      resolve(message.phases);
    };
    server.child.on('message', onMessage);
    server.child.send('phases');
  });
}

/** The `q` quantile of `values` (0–1), ms with two decimals, or `–` for none. */
function quantile(values: number[], q: number): string {
  if (values.length === 0) return '–';
  const sorted = [...values].sort((a, b) => a - b);
  return (sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * q))] as number).toFixed(2);
}

const benchStores: BenchStores = {
  stores,
  databaseUrl,
  pgSchema,
  redisUrl,
  redisPrefix: `bench:http-phases:${run}:`,
  tempDirs: [sqliteDir, buildDir],
};
await prepareBenchStores(benchStores);

interface Row {
  name: string;
  store: BenchServerConfig['store'];
}
const rows: Row[] = [
  { name: 'baseline (no idempotency)', store: 'none' },
  ...stores.map((store) => ({ name: `idempotency-kit, ${store}`, store })),
];
if (stores.includes('redis')) {
  rows.push({ name: 'floor: no idempotency, 2 Redis round trips', store: 'redis-floor' });
}
const command = `${defaults ? '' : `DURATION=${duration} ROUNDS=${rounds} DELAY_MS=${delayMs} `}${
  roundOrderNote().trim() ? `${roundOrderNote().trim()} ` : ''
}${useTsx ? 'TSX=1 ' : ''}npx tsx bench/http-phases.ts`;
const resultsFile = new ResultsFile('http-phases');

try {
  const servers = await Promise.all(
    rows.map((row) =>
      startServer({
        store: row.store,
        src: library,
        delayMs,
        sqliteFile: join(sqliteDir, 'phases.db'),
        redisUrl,
        redisPrefix: `bench:http-phases:${run}:`,
        databaseUrl,
        pgSchema,
      }),
    ),
  );
  const loads = rows.map(() => [] as LoadResult[]);
  const times = rows.map(() => ({
    beforeHandler: [] as number[],
    handler: [] as number[],
    afterHandler: [] as number[],
  }));
  try {
    const prefix = randomUUID();
    for (const [index, server] of servers.entries()) {
      await load(server.url, 1, (n) => `warm-${prefix}-${index}-${n}`);
      await takePhases(server);
    }
    for (let round = 0; round < rounds; round++) {
      for (const [index, server] of inRoundOrder([...servers.entries()], round)) {
        loads[index]!.push(
          await load(server.url, duration, (n) => `${prefix}-${round}-${index}-${n}`),
        );
        const taken = await takePhases(server);
        times[index]!.beforeHandler.push(...taken.beforeHandler);
        times[index]!.handler.push(...taken.handler);
        times[index]!.afterHandler.push(...taken.afterHandler);
      }
    }
  } finally {
    for (const server of servers) server.child.kill('SIGKILL');
  }
  const table: BenchRow[] = rows.map((row, index) => {
    const rps = loads[index]!.map((result) => result.rps);
    const phase = times[index]!;
    return {
      name: row.name,
      opsPerSec: median(rps),
      extra: {
        ...roundColumns(
          rps,
          loads[0]!.map((result) => result.rps),
        ),
        'arrival → handler p50 / p90 ms': `${quantile(phase.beforeHandler, 0.5)} / ${quantile(phase.beforeHandler, 0.9)}`,
        'handler p50 ms': quantile(phase.handler, 0.5),
        'answer → finish p50 / p90 ms': `${quantile(phase.afterHandler, 0.5)} / ${quantile(phase.afterHandler, 0.9)}`,
        requests: String(phase.handler.length),
      },
    };
  });
  resultsFile.table(
    `HTTP phases (Express, autocannon, 50 connections, ${delayMs} ms handler, unique keys)`,
    command,
    table,
    { chart: false },
  );
} finally {
  await cleanupBenchStores(benchStores);
}
if (defaults) resultsFile.write();
process.exit(0);
