/**
 * `run()` overhead on the memory store against calling `fn` directly, measured side by side in one run,
 * and what observability adds to it (the Prometheus hooks, the store timed by `withStoreMetrics`, the
 * OpenTelemetry hooks inside a recording span of a real SDK).
 * Run: npx tsx bench/core.ts (`BENCH_N` calls per row and round, default 20,000; `BENCH_ROUNDS`, default 5)
 */
import { context, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { BasicTracerProvider, NoopSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { Registry } from 'prom-client';
import { combineHooks, createIdempotency, memoryStore } from '../src/index.js';
import { openTelemetryHooks } from '../src/opentelemetry/index.js';
import { prometheusHooks, withStoreMetrics } from '../src/prometheus/index.js';
import { median } from './lib/report.js';
import { ResultsFile } from './lib/results.js';

const results = new ResultsFile('core');

const N = Number(process.env.BENCH_N ?? 20_000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
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
  const metered = createIdempotency({
    store: memoryStore(),
    extendLease: false,
    hooks: prometheusHooks({ registry: new Registry() }),
  });
  const timedStore = createIdempotency({
    store: withStoreMetrics(memoryStore(), { registry: new Registry() }),
    extendLease: false,
  });
  const observed = createIdempotency({
    store: memoryStore(),
    extendLease: false,
    hooks: combineHooks(prometheusHooks({ registry: new Registry() }), openTelemetryHooks()),
  });
  // A recording span around each call, as an instrumented request has; spans are dropped, not exported.
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  trace.setGlobalTracerProvider(
    new BasicTracerProvider({ spanProcessors: [new NoopSpanProcessor()] }),
  );
  const tracer = trace.getTracer('bench');
  const inSpan = <T>(body: () => Promise<T>) =>
    tracer.startActiveSpan('request', async (span) => {
      try {
        return await body();
      } finally {
        span.end();
      }
    });
  let counter = 0;
  const payload = { amount: 4200, currency: 'EUR', customer: 'cus_1' };

  // Warm up every path so the JIT has compiled them before measuring.
  await timeEach(WARMUP, () => fn());
  await timeEach(WARMUP, () => idempotency.run({ key: `w${counter++}`, payload }, fn));
  await timeEach(WARMUP, () => withHeartbeat.run({ key: `w${counter++}`, payload }, fn));
  await timeEach(WARMUP, () => metered.run({ key: `w${counter++}`, payload }, fn));
  await timeEach(WARMUP, () => timedStore.run({ key: `w${counter++}`, payload }, fn));
  await timeEach(WARMUP, () => inSpan(() => fn()));
  await timeEach(WARMUP, () => inSpan(() => observed.run({ key: `w${counter++}`, payload }, fn)));
  await idempotency.run({ key: 'hot', payload }, fn);
  await noCache.run({ key: 'hot', payload }, fn);

  // Rows in rounds, each round in a rotated order: this machine's speed drifts over seconds, and a row
  // measured in one block would carry whatever drift hit it. A row's figure is the median of its rounds'
  // medians.
  const rows: Array<[name: string, op: () => Promise<unknown>]> = [
    ['baseline: fn() called directly', () => fn()],
    [
      'run(): new key, executed (heartbeat off)',
      () => idempotency.run({ key: `e${counter++}`, payload }, fn),
    ],
    [
      'run(): new key, executed (heartbeat on, default)',
      () => withHeartbeat.run({ key: `h${counter++}`, payload }, fn),
    ],
    ['run(): replay, local cache hit', () => idempotency.run({ key: 'hot', payload }, fn)],
    ['run(): replay from the store (cache off)', () => noCache.run({ key: 'hot', payload }, fn)],
    [
      'run(): new key, executed, with prometheusHooks',
      () => metered.run({ key: `m${counter++}`, payload }, fn),
    ],
    [
      'run(): new key, executed, store wrapped by withStoreMetrics',
      () => timedStore.run({ key: `t${counter++}`, payload }, fn),
    ],
    [
      'run(): new key, executed, in a span (no hooks)',
      () => inSpan(() => idempotency.run({ key: `s${counter++}`, payload }, fn)),
    ],
    [
      'run(): new key, executed, in a span, Prometheus + OpenTelemetry hooks',
      () => inSpan(() => observed.run({ key: `o${counter++}`, payload }, fn)),
    ],
  ];
  const roundMedians: number[][] = rows.map(() => []);
  for (let round = 0; round < ROUNDS; round++) {
    for (let k = 0; k < rows.length; k++) {
      const i = (k + round) % rows.length;
      const [, op] = rows[i]!;
      roundMedians[i]!.push(median(await timeEach(N, op)));
    }
  }

  const base = median(roundMedians[0]!);
  results.table(
    `run() overhead on the memory store (${N.toLocaleString('en-US')} sequential calls per row and round, ${ROUNDS} rounds)`,
    'npx tsx bench/core.ts',
    rows.map(([name], i) => {
      const m = median(roundMedians[i]!);
      return {
        name,
        opsPerSec: 1e6 / m,
        medianUs: m,
        extra: {
          'overhead µs (median)': (m - base).toFixed(2),
          'median µs, rounds': roundMedians[i]!.map((r) => r.toFixed(2)).join(' / '),
        },
      };
    }),
    { chart: false },
  );
  results.write();
}

await main();
