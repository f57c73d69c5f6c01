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
 */
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { createIdempotency } from '../src/index.js';
import { migrate, postgresStore, postgresTransactional } from '../src/postgres/index.js';
import { type BenchRow, median, throughput } from './lib/report.js';
import { ResultsFile } from './lib/results.js';

const results = new ResultsFile('postgres');

const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const CONCURRENCY = 50;
const POOL_SIZE = 10;
const OPS = Number(process.env.BENCH_OPS ?? 1500);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 9);
const DAY = 86_400_000;

async function main(): Promise<void> {
  const pool = new pg.Pool({
    connectionString: DATABASE_URL,
    max: POOL_SIZE,
    application_name: 'ik-bench',
  });
  pool.on('error', () => {});
  const schema = `ik_bench_${process.pid}`;
  await migrate(pool, { schema });
  await pool.query(
    `CREATE TABLE "${schema}".plain (id text PRIMARY KEY, status text NOT NULL, payload bytea)`,
  );
  const store = postgresStore({ pool, schema });
  const engine = createIdempotency({ store, cache: false, extendLease: false });
  const unbatched = createIdempotency({ store, cache: false, extendLease: false, batch: false });
  const transactional = postgresTransactional({ pool, schema });
  const outcome = Buffer.from('{"status":201,"body":{"id":"ord_123"}}');
  const run = randomUUID().slice(0, 8);

  const cases: Array<{ name: string; op: (i: number, round: number) => Promise<unknown> }> = [
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
    {
      name: 'postgresStore: claim + complete',
      op: async (i, round) => {
        const key = `${run}:s:${round}:${i}`;
        const claim = await store.claim(key, { fingerprint: 'fp', leaseMs: 30_000 });
        if (!claim.claimed) throw new Error('unexpected conflict');
        if (!(await store.complete(key, claim.token, outcome, DAY))) throw new Error('fenced out');
      },
    },
    {
      // The engine's default: concurrent claims (and completions) coalesce into one claim-many
      // (complete-many) statement, so many pairs share a round trip and a commit.
      name: 'engine.run over postgresStore, batched (the default; cache off)',
      op: (i, round) =>
        engine.run({ key: `${run}:e:${round}:${i}`, payload: { i } }, () => ({ id: i })),
    },
    {
      name: 'engine.run over postgresStore, batch: false (cache off)',
      op: (i, round) =>
        unbatched.run({ key: `${run}:u:${round}:${i}`, payload: { i } }, () => ({ id: i })),
    },
    {
      name: 'runInTransaction (BEGIN, claim, complete, COMMIT)',
      op: (i, round) =>
        transactional.runInTransaction({ key: `${run}:t:${round}:${i}`, payload: { i } }, () => ({
          id: i,
        })),
    },
  ];

  try {
    // Warm-up: connections, plans, caches.
    for (const c of cases) await throughput(500, CONCURRENCY, (i) => c.op(i, -1));
    const samples = new Map<string, number[]>(cases.map((c) => [c.name, []]));
    for (let round = 0; round < ROUNDS; round++) {
      for (const c of cases) {
        samples.get(c.name)!.push(await throughput(OPS, CONCURRENCY, (i) => c.op(i, round)));
      }
    }
    const baseline = samples.get(cases[0]!.name)!;
    const rows: BenchRow[] = cases.map((c) => {
      const own = samples.get(c.name)!;
      const paired = own.map((s, round) => s / baseline[round]!);
      return {
        name: c.name,
        opsPerSec: median(own),
        extra: {
          'median paired ratio': `${(median(paired) * 100).toFixed(1)}%`,
          rounds: own.map((s) => Math.round(s)).join(' / '),
        },
      };
    });
    results.table(
      `PostgreSQL: pairs/s at ${CONCURRENCY} concurrent callers, pool ${POOL_SIZE}, ${OPS} pairs × ${ROUNDS} rounds`,
      'npx tsx bench/postgres.ts',
      rows,
    );
    results.write();
  } finally {
    await pool.query(`DROP SCHEMA "${schema}" CASCADE`);
    await pool.end();
  }
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
