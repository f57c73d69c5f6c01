/**
 * PostgreSQL store throughput: claim+complete pairs per second at 50 concurrent callers, against a
 * baseline of one INSERT plus one UPDATE on a plain table (the same two round trips with no idempotency
 * logic), measured side by side in the same run with the same pool size. Rounds alternate between the
 * cases so load from other processes hits them alike; the table shows the median round of each case and,
 * because a shared machine's load drifts between rounds, the median of the per-round ratios against the
 * baseline round run just before (the steadier figure).
 *
 * The store row calls `claim` and `complete` one key at a time; the engine rows add the engine's work
 * (fingerprint, storage key, outcome codec) and, by default, its natural batching.
 *
 * Run: `npx tsx bench/postgres.ts` (DATABASE_URL, default postgres://postgres@127.0.0.1:5432/test).
 * `BENCH_OPS` sets the pairs per row and round (default 1500), `BENCH_ROUNDS` the rounds (default 9),
 * `BENCH_ROWS` a comma-separated list of row numbers to run (the baseline, row 0, always runs).
 * `COMPARE=name=/abs/path/to/src,…` measures the two rows that claim one key per statement (the store row
 * and `batch: false`) once more per variant, right after the checkout's, with the library loaded from
 * another source tree (a snapshot of `src/`, through tsx like the checkout's): before/after figures of a
 * change in the same rounds. Each such row also shows the median of its per-round ratios to the checkout's
 * row. A partial run (`BENCH_ROWS`, `COMPARE`) writes no results file.
 *
 * `PG_AT=<n>` runs the batched engine row once more, last, on a schema migrated only up to migration `n`: a
 * later migration's effect, measured in one run (`PG_AT=6`: 0007, which plans the batch functions once per
 * connection instead of on every call). Each row also shows the CPU its PostgreSQL backends spent per pair
 * (from `/proc`, Linux; 10 ms resolution).
 */
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import * as checkoutCore from '../src/index.js';
import * as checkoutPostgres from '../src/postgres/index.js';
import { migrateUpTo, pgAtVersion, schemaAtLabel } from './lib/bench-stores.js';
import { compareVariants } from './lib/build-lib.js';
import { libraryModule } from './lib/library.js';
import { cpuSince, processCpuByPid } from './lib/proc-cpu.js';
import { type BenchRow, median, throughput } from './lib/report.js';
import { ResultsFile } from './lib/results.js';

const results = new ResultsFile('postgres');

const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const CONCURRENCY = 50;
const POOL_SIZE = 10;
const OPS = Number(process.env.BENCH_OPS ?? 1500);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 9);
const ONLY = process.env.BENCH_ROWS?.split(',').map(Number);
const compare = compareVariants();
const DAY = 86_400_000;

/** The parts of the library the rows use: this checkout's, or a `COMPARE` variant's. */
interface Library {
  createIdempotency: typeof checkoutCore.createIdempotency;
  postgresStore: typeof checkoutPostgres.postgresStore;
}

/** Load the library from the source tree `src` (TypeScript, which tsx resolves from `.js` specifiers). */
async function loadLibrary(src: string): Promise<Library> {
  const [core, postgres] = await Promise.all([
    libraryModule<typeof checkoutCore>(src, 'index.js'),
    libraryModule<typeof checkoutPostgres>(src, 'postgres/index.js'),
  ]);
  return { createIdempotency: core.createIdempotency, postgresStore: postgres.postgresStore };
}

/** A row: its name, the operation it times, and the checkout row it repeats (a `COMPARE` variant's). */
interface Case {
  name: string;
  op: (i: number, round: number) => Promise<unknown>;
  variantOf?: string;
}

async function main(): Promise<void> {
  const pool = new pg.Pool({
    connectionString: DATABASE_URL,
    max: POOL_SIZE,
    application_name: 'ik-bench',
  });
  pool.on('error', () => {});
  const schema = `ik_bench_${process.pid}`;
  await checkoutPostgres.migrate(pool, { schema });
  await pool.query(
    `CREATE TABLE "${schema}".plain (id text PRIMARY KEY, status text NOT NULL, payload bytea)`,
  );
  const store = checkoutPostgres.postgresStore({ pool, schema });
  const engine = checkoutCore.createIdempotency({ store, cache: false, extendLease: false });
  const pgAt = pgAtVersion();
  const schemaAt = pgAt === undefined ? undefined : `${schema}_at${pgAt}`;
  const transactional = checkoutPostgres.postgresTransactional({ pool, schema });
  const outcome = Buffer.from('{"status":201,"body":{"id":"ord_123"}}');
  const run = randomUUID().slice(0, 8);

  // The rows that send a claim alone, for the library `lib`; `tag` keeps each variant's keys apart.
  const storeRow = (lib: Library, tag: string): Case => {
    const own = lib.postgresStore({ pool, schema });
    return {
      name: 'postgresStore: claim + complete',
      op: async (i, round) => {
        const key = `${run}:s${tag}:${round}:${i}`;
        const claim = await own.claim(key, { fingerprint: 'fp', leaseMs: 30_000 });
        if (!claim.claimed) throw new Error('unexpected conflict');
        if (!(await own.complete(key, claim.token, outcome, DAY))) throw new Error('fenced out');
      },
    };
  };
  const unbatchedRow = (lib: Library, tag: string): Case => {
    const unbatched = lib.createIdempotency({
      store: lib.postgresStore({ pool, schema }),
      cache: false,
      extendLease: false,
      batch: false,
    });
    return {
      name: 'engine.run over postgresStore, batch: false (cache off)',
      op: (i, round) =>
        unbatched.run({ key: `${run}:u${tag}:${round}:${i}`, payload: { i } }, () => ({ id: i })),
    };
  };
  const checkout: Library = {
    createIdempotency: checkoutCore.createIdempotency,
    postgresStore: checkoutPostgres.postgresStore,
  };

  const cases: Case[] = [
    {
      name: 'baseline: INSERT + UPDATE on a plain table',
      op: async (i, round) => {
        const id = `${run}:b:${round}:${i}`;
        await pool.query(`INSERT INTO "${schema}".plain (id, status) VALUES ($1, 'in_progress')`, [
          id,
        ]);
        await pool.query(
          `UPDATE "${schema}".plain SET status = 'completed', payload = $2 WHERE id = $1`,
          [id, outcome],
        );
      },
    },
    storeRow(checkout, ''),
    {
      // The engine's default: concurrent claims (and completions) coalesce into one claim-many
      // (complete-many) statement, so many pairs share a round trip and a commit.
      name: 'engine.run over postgresStore, batched (the default; cache off)',
      op: (i, round) =>
        engine.run({ key: `${run}:e:${round}:${i}`, payload: { i } }, () => ({ id: i })),
    },
    unbatchedRow(checkout, ''),
    {
      name: 'runInTransaction (BEGIN, claim, complete, COMMIT)',
      op: (i, round) =>
        transactional.runInTransaction({ key: `${run}:t:${round}:${i}`, payload: { i } }, () => ({
          id: i,
        })),
    },
  ];
  // Last, so that the rows above keep their numbers (BENCH_ROWS).
  if (pgAt !== undefined && schemaAt !== undefined) {
    await migrateUpTo(pool, schemaAt, pgAt);
    const engineAt = checkoutCore.createIdempotency({
      store: checkoutPostgres.postgresStore({ pool, schema: schemaAt }),
      cache: false,
      extendLease: false,
    });
    cases.push({
      name: `engine.run over postgresStore, batched (the default; cache off), ${schemaAtLabel(pgAt)}`,
      op: (i, round) =>
        engineAt.run({ key: `${run}:a:${round}:${i}`, payload: { i } }, () => ({ id: i })),
    });
  }

  // Rows by number (BENCH_ROWS), then each COMPARE variant's rows right after the checkout's they repeat.
  const selected = cases.filter(
    (_, index) => index === 0 || ONLY === undefined || ONLY.includes(index),
  );
  for (const [v, variant] of compare.entries()) {
    const lib = await loadLibrary(variant.src);
    for (const make of [storeRow, unbatchedRow]) {
      const row = make(lib, `v${v}`);
      const at = selected.findLastIndex((c) => c.name === row.name || c.variantOf === row.name);
      if (at < 0) continue;
      selected.splice(at + 1, 0, {
        ...row,
        name: `${row.name} [${variant.name}]`,
        variantOf: row.name,
      });
    }
  }

  try {
    // Warm-up: connections, plans, caches.
    for (const c of selected) await throughput(500, CONCURRENCY, (i) => c.op(i, -1));
    const samples = new Map<string, number[]>(selected.map((c) => [c.name, []]));
    const postgresCpu = new Map<string, number>(selected.map((c) => [c.name, 0]));
    for (let round = 0; round < ROUNDS; round++) {
      for (const c of selected) {
        const before = processCpuByPid(['postgres']);
        samples.get(c.name)!.push(await throughput(OPS, CONCURRENCY, (i) => c.op(i, round)));
        const spent = cpuSince(before, processCpuByPid(['postgres']));
        postgresCpu.set(c.name, postgresCpu.get(c.name)! + spent);
      }
    }
    const baseline = samples.get(selected[0]!.name)!;
    const pairedMedian = (own: number[], against: number[]) =>
      `${(median(own.map((s, round) => s / against[round]!)) * 100).toFixed(1)}%`;
    const rows: BenchRow[] = selected.map((c) => {
      const own = samples.get(c.name)!;
      const checkoutRow = c.variantOf === undefined ? undefined : samples.get(c.variantOf);
      return {
        name: c.name,
        opsPerSec: median(own),
        extra: {
          'median paired ratio': pairedMedian(own, baseline),
          ...(compare.length > 0 && {
            'vs checkout row': checkoutRow === undefined ? '' : pairedMedian(own, checkoutRow),
          }),
          'postgres CPU µs/pair': ((postgresCpu.get(c.name)! * 1e6) / (OPS * ROUNDS)).toFixed(1),
          rounds: own.map((s) => Math.round(s)).join(' / '),
        },
      };
    });
    results.table(
      `PostgreSQL: pairs/s at ${CONCURRENCY} concurrent callers, pool ${POOL_SIZE}, ${OPS} pairs × ${ROUNDS} rounds`,
      `${pgAt === undefined ? '' : `PG_AT=${pgAt} `}npx tsx bench/postgres.ts`,
      rows,
    );
    if (ONLY === undefined && compare.length === 0) results.write();
  } finally {
    await pool.query(`DROP SCHEMA "${schema}" CASCADE`);
    if (schemaAt !== undefined) await pool.query(`DROP SCHEMA IF EXISTS "${schemaAt}" CASCADE`);
    await pool.end();
  }
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
