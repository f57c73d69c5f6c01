/**
 * idempotency-kit against its peer libraries over HTTP: autocannon at 50 connections against a baseline
 * Express app (no idempotency), the same app behind idempotency-kit on Redis (the Redis row of
 * `bench/http.ts`), and behind each peer on the same Redis, configured as its README recommends (see the
 * header of each file in `bench/peers/`). The scenarios are those of `bench/http.ts`:
 *
 * - S1: 50 ms handler, a unique key per request;
 * - S2: 0 ms handler, a unique key per request;
 * - S3: 0 ms handler, replays of 100 completed keys.
 *
 * Only 2xx answers count: a row's rate is its 2xx answers divided by the run's length, and a row with non-2xx
 * answers or errors is marked in the table. Each server also reports its own CPU time, given per 2xx answer:
 * unlike the rate, it hardly moves when other work shares the 2 cores. For the peers the server also counts
 * how often the route's work really ran, so S3 can show that a replay did not run it again.
 *
 * Run: `flock /tmp/bench.lock npx tsx bench/http-peers.ts` (DURATION seconds per measurement, default 3;
 * ROUNDS, default 3, interleaved and reported as the median; ONLY, scenario ids such as `S2,S3`, measures
 * only those and writes no results file; PEERS, default
 * `express-idempotency,node-idempotency,powertools`; REDIS_URL as in the tests; PEERS_REDIS_DB, default 9).
 * idempotency-kit runs compiled by `tsc`, as the peers run their packages' JavaScript (`TSX=1` loads its
 * sources through tsx instead; see `lib/build-lib.ts`). It keeps its keys under a run prefix on REDIS_URL, as
 * `bench/http.ts` does; the peers write to
 * the private DB PEERS_REDIS_DB under keys that start with `ikpeers-<run>-`, and only those keys are deleted
 * afterwards (never FLUSHDB/FLUSHALL: the Redis is shared). The tables are printed and written to
 * `bench/results/http-peers.md`.
 */
import type { ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { type BenchStores, cleanupBenchStores } from './lib/bench-stores.js';
import { libraryBuilder, repoRoot } from './lib/build-lib.js';
import { type LoadResult, load, ORDER_BODY, selectedScenarios } from './lib/http-load.js';
import type { BenchCpuReport, BenchServerConfig } from './lib/http-server.js';
import { type BenchRow, median } from './lib/report.js';
import { ResultsFile } from './lib/results.js';
import { startServerChild } from './lib/server-child.js';
import type { PeerStats } from './peers/server.js';
import { PEER_LABELS, PEERS, type PeerName, type PeerServerConfig } from './peers/types.js';

const duration = Number(process.env.DURATION ?? 3);
const rounds = Number(process.env.ROUNDS ?? 3);
const peers = (process.env.PEERS ?? PEERS.join(',')).split(',') as PeerName[];
const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const peersDb = Number(process.env.PEERS_REDIS_DB ?? 9);
const run = randomUUID().slice(0, 8);
const peersRedisUrl = (() => {
  const url = new URL(redisUrl);
  url.pathname = `/${peersDb}`;
  return url.toString();
})();
/** Every key of this run starts with one of these (the peer adapters write the raw header as a key). */
const peersPrefix = `ikpeers-${run}-`;
const kitPrefix = `bench:http-peers:${run}:`;

// idempotency-kit runs compiled, as users run the published `dist/` and as the peers run their own
// packages' JavaScript; through tsx it would also pay esbuild's per-closure `keepNames` helper.
const { buildDir, build } = libraryBuilder('ik-bench-http-peers-build-');
const library = build('main', join(repoRoot, 'src'));

for (const peer of peers) {
  if (!PEERS.includes(peer)) throw new Error(`unknown peer ${peer}; known: ${PEERS.join(', ')}`);
}

type Row =
  | { kind: 'baseline'; name: string }
  | { kind: 'kit'; name: string }
  | { kind: 'peer'; name: string; peer: PeerName };

const ROWS: Row[] = [
  { kind: 'baseline', name: 'baseline (no idempotency)' },
  { kind: 'kit', name: 'idempotency-kit, redis' },
  ...peers.map((peer) => ({ kind: 'peer' as const, name: PEER_LABELS[peer], peer })),
];

/** A running server child. */
interface Server {
  url: string;
  child: ChildProcess;
  stop: () => void;
}

async function startChild(script: string, env: Record<string, string>): Promise<Server> {
  const server = await startServerChild(new URL(script, import.meta.url), env);
  return { ...server, stop: () => server.child.kill('SIGKILL') };
}

function startServer(row: Row, delayMs: number, scenario: string): Promise<Server> {
  if (row.kind === 'peer') {
    const config: PeerServerConfig = {
      peer: row.peer,
      delayMs,
      redisUrl: peersRedisUrl,
      keyPrefix: peersPrefix,
    };
    return startChild('./peers/server.ts', { IK_BENCH_PEER: JSON.stringify(config) });
  }
  const config: BenchServerConfig = {
    store: row.kind === 'kit' ? 'redis' : 'none',
    delayMs,
    redisUrl,
    redisPrefix: `${kitPrefix}${scenario}:`,
    src: library,
  };
  return startChild('./lib/http-server.ts', { IK_BENCH_HTTP: JSON.stringify(config) });
}

/** The server's CPU time so far and, for a peer, how many times its route's work ran. */
function probe(server: Server): Promise<BenchCpuReport & Partial<PeerStats>> {
  return new Promise((resolve) => {
    server.child.once('message', resolve);
    server.child.send('cpu');
  });
}

// Only 2xx answers are successes: a peer's rate is its 2xx per second.
type Measurement = LoadResult & { cpuUs: number; reruns?: number };

const { scenarios, partial } = selectedScenarios();
const command = `DURATION=${duration} ROUNDS=${rounds}${
  process.env.PEERS ? ` PEERS=${process.env.PEERS}` : ''
} flock /tmp/bench.lock npx tsx bench/http-peers.ts`;
const resultsFile = new ResultsFile('http-peers');
const summary = new Map<string, Record<string, string>>(ROWS.map((row) => [row.name, {}]));
try {
  for (const scenario of scenarios) {
    // One server per row for the whole scenario; rows are measured in interleaved rounds so that the
    // drift of a shared, noisy machine hits every row alike. Each row reports the median of its rounds.
    const servers = await Promise.all(
      ROWS.map((row) => startServer(row, scenario.delayMs, scenario.id)),
    );
    const results = ROWS.map(() => [] as Measurement[]);
    try {
      for (const [index, server] of servers.entries()) {
        // Each row has its own keys; they all start with the peers' prefix so the cleanup finds them.
        const prefix = `${peersPrefix}${scenario.id}-${index}`;
        if (scenario.replay && ROWS[index]!.kind !== 'baseline') {
          // Complete the 100 keys first, so the measured runs only replay.
          for (let i = 0; i < 100; i++) {
            const res = await fetch(server.url, {
              method: 'POST',
              headers: { 'content-type': 'application/json', 'idempotency-key': `${prefix}-${i}` },
              body: ORDER_BODY,
            });
            await res.arrayBuffer();
          }
          // The peers persist completions fire-and-forget: give the last writes time to land.
          await new Promise((resolve) => setTimeout(resolve, 200));
        }
        await load(server.url, 1, (n) => `${prefix}-warm-${n}`);
      }
      for (let round = 0; round < rounds; round++) {
        for (const [index, server] of servers.entries()) {
          const row = ROWS[index]!;
          const prefix = `${peersPrefix}${scenario.id}-${index}`;
          // The baseline gets the same headers (and the same client-side work); it just ignores them.
          const keyOf = scenario.replay
            ? (n: number) => `${prefix}-${n % 100}`
            : (n: number) => `${prefix}-${round}-${n}`;
          const before = await probe(server);
          const result = await load(server.url, duration, keyOf);
          const after = await probe(server);
          const cpu = after.cpu.user + after.cpu.system - before.cpu.user - before.cpu.system;
          const measured: Measurement = { ...result, cpuUs: cpu / Math.max(1, result.ok) };
          if (scenario.replay && row.kind === 'peer') {
            measured.reruns = (after.executions ?? 0) - (before.executions ?? 0);
          }
          results[index]!.push(measured);
        }
      }
    } finally {
      for (const server of servers) server.stop();
    }
    const base = median(results[0]!.map((r) => r.okRps));
    const rows: BenchRow[] = ROWS.map((row, index) => {
      const runs = results[index]!;
      const rps = runs.map((r) => r.okRps);
      const mid = runs[rps.indexOf(median(rps))] ?? runs[0]!;
      const bad = runs.reduce((sum, r) => sum + r.bad, 0);
      const reruns = runs.reduce((sum, r) => sum + (r.reruns ?? 0), 0);
      const statuses = [...new Set(runs.flatMap((r) => r.statuses))].join(' ');
      const notes = [
        bad > 0
          ? `FAILED: ${bad} non-2xx/errors${statuses ? ` (${statuses})` : ''}, only 2xx counted`
          : '',
        reruns > 0 ? `handler re-ran ${reruns}× on replays` : '',
      ].filter(Boolean);
      const cpuUs = median(runs.map((r) => r.cpuUs));
      const share = `${((median(rps) / base) * 100).toFixed(1)}% · ${cpuUs.toFixed(0)} µs${notes.length > 0 ? ' ⚠' : ''}`;
      summary.get(row.name)![scenario.id] = share;
      return {
        name: row.name,
        opsPerSec: median(rps),
        extra: {
          rounds: rps.map((r) => Math.round(r).toLocaleString('en-US')).join(' / '),
          'p50 ms': String(mid.p50),
          'p99 ms': String(mid.p99),
          'server CPU µs/2xx': cpuUs.toFixed(0),
          'non-2xx/errors': String(bad),
          notes: notes.join('; ') || '–',
        },
      };
    });
    resultsFile.table(
      `HTTP vs peers (Express, autocannon, 50 connections, Redis): ${scenario.title}`,
      command,
      rows,
      { chartTitle: `HTTP vs peers, Express and Redis: ${scenario.title}` },
    );
  }
} finally {
  const cleanup = (url: string, prefix: string): BenchStores => ({
    stores: ['redis'],
    databaseUrl: '',
    pgSchema: '',
    redisUrl: url,
    redisPrefix: prefix,
    tempDirs: [],
  });
  await cleanupBenchStores({ ...cleanup(redisUrl, kitPrefix), tempDirs: [buildDir] });
  await cleanupBenchStores(cleanup(peersRedisUrl, peersPrefix));
}

const summaryTable = [
  '### HTTP vs peers: share of baseline (2xx/s) · server CPU per 2xx answer (medians of rounds)',
  '',
  `Command: \`${command}\` · ${new Date().toISOString().slice(0, 10)} · ⚠ = failures or re-runs, see the tables above`,
  '',
  `| case | ${scenarios.map((s) => s.title).join(' | ')} |`,
  `| --- | ${scenarios.map(() => '---').join(' | ')} |`,
  ...ROWS.map(
    (row) =>
      `| ${row.name} | ${scenarios.map((s) => summary.get(row.name)![s.id] ?? '').join(' | ')} |`,
  ),
  '',
].join('\n');
resultsFile.text(summaryTable);
if (!partial) resultsFile.write();
process.exit(0);
