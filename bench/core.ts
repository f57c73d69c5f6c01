/**
 * `run()` overhead on the memory store against calling `fn` directly, measured side by side in one run.
 * Run: npx tsx bench/core.ts
 */
import { createIdempotency, memoryStore } from '../src/index.js';
import { median } from './lib/report.js';
import { ResultsFile } from './lib/results.js';

const results = new ResultsFile('core');

const N = Number(process.env.BENCH_N ?? 50_000);
const WARMUP = 5_000;

const fn = async () => ({ id: 'pay_123', status: 'captured', amount: 4200 });

async function timeEach(count: number, op: (i: number) => Promise<unknown>): Promise<number[]> {
  const samples: number[] = new Array(count);
  for (let i = 0; i < count; i++) {
    const start = process.hrtime.bigint();
    await op(i);
    samples[i] = Number(process.hrtime.bigint() - start) / 1000;
  }
  return samples;
}

async function main() {
  const idempotency = createIdempotency({ store: memoryStore(), extendLease: false });
  const withHeartbeat = createIdempotency({ store: memoryStore() });
  const noCache = createIdempotency({ store: memoryStore(), cache: false, extendLease: false });
  let counter = 0;
  const payload = { amount: 4200, currency: 'EUR', customer: 'cus_1' };

  // Warm up every path so the JIT has compiled them before measuring.
  await timeEach(WARMUP, () => fn());
  await timeEach(WARMUP, () => idempotency.run({ key: `w${counter++}`, payload }, fn));
  await timeEach(WARMUP, () => withHeartbeat.run({ key: `w${counter++}`, payload }, fn));
  await idempotency.run({ key: 'hot', payload }, fn);
  await noCache.run({ key: 'hot', payload }, fn);

  const direct = await timeEach(N, () => fn());
  const executed = await timeEach(N, () => idempotency.run({ key: `e${counter++}`, payload }, fn));
  const executedHb = await timeEach(N, () =>
    withHeartbeat.run({ key: `h${counter++}`, payload }, fn),
  );
  const replayCached = await timeEach(N, () => idempotency.run({ key: 'hot', payload }, fn));
  const replayStore = await timeEach(N, () => noCache.run({ key: 'hot', payload }, fn));

  const base = median(direct);
  const row = (name: string, samples: number[]) => {
    const m = median(samples);
    return {
      name,
      opsPerSec: 1e6 / m,
      medianUs: m,
      extra: { 'overhead µs (median)': (m - base).toFixed(2) },
    };
  };
  results.table(
    `run() overhead on the memory store (${N.toLocaleString('en-US')} sequential calls each)`,
    'npx tsx bench/core.ts',
    [
      row('baseline: fn() called directly', direct),
      row('run(): new key, executed (heartbeat off)', executed),
      row('run(): new key, executed (heartbeat on, default)', executedHb),
      row('run(): replay, local cache hit', replayCached),
      row('run(): replay from the store (cache off)', replayStore),
    ],
    { chart: false },
  );
  results.write();
}

await main();
