/**
 * The HTTP benchmarks' load: the scenarios of issue #5 and one autocannon run of POST /orders with an
 * `Idempotency-Key` per request, shared by `bench/http.ts` and `bench/http-peers.ts` so both measure the
 * same thing.
 * @module
 */
import autocannon from 'autocannon';

/**
 * S1/S2/S3: handler delay, whether requests replay 100 completed keys instead of new ones, and the share of
 * the baseline issue #5 asks for (drawn on the charts).
 */
export const SCENARIOS = [
  {
    id: 'S1',
    title: 'S1: 50 ms handler, unique keys',
    delayMs: 50,
    replay: false,
    targets: [{ ratio: 0.99, label: 'target, Redis and PostgreSQL' }],
  },
  {
    id: 'S2',
    title: 'S2: 0 ms handler, unique keys',
    delayMs: 0,
    replay: false,
    targets: [
      { ratio: 0.85, label: 'target, Redis' },
      { ratio: 0.7, label: 'target, PostgreSQL' },
    ],
  },
  {
    id: 'S3',
    title: 'S3: 0 ms handler, replays of 100 completed keys',
    delayMs: 0,
    replay: true,
    targets: [],
  },
] as const;

/**
 * The scenarios to measure: all of them, or those whose ids ONLY lists (`ONLY=S2,S3`). A run that
 * measures only some does not write its results file, so the committed tables always hold all three.
 */
export function selectedScenarios(): { scenarios: typeof SCENARIOS; partial: boolean } {
  const only = process.env.ONLY?.split(',');
  if (only === undefined) return { scenarios: SCENARIOS, partial: false };
  const picked = SCENARIOS.filter((scenario) => only.includes(scenario.id));
  return { scenarios: picked as unknown as typeof SCENARIOS, partial: true };
}

/** The request body every scenario sends. */
export const ORDER_BODY = JSON.stringify({ amount: 4200, currency: 'EUR' });

/** What one run measured. */
export interface LoadResult {
  /** Every answer per second (autocannon's average). */
  rps: number;
  /** 2xx answers, and 2xx answers per second of the run. */
  ok: number;
  okRps: number;
  /** Latency percentiles, ms. */
  p50: number;
  p99: number;
  /** Non-2xx answers plus errors (autocannon's `errors` already counts timeouts). */
  bad: number;
  /** Non-2xx statuses seen, as `409×12`. */
  statuses: string[];
}

/**
 * One autocannon run at 50 connections; `keyOf` gives the key of the n-th request. With `rate`, the
 * connections send that many requests per second in all (a fixed offered load) instead of as many as the
 * server answers.
 */
export async function load(
  url: string,
  seconds: number,
  keyOf: (n: number) => string,
  rate?: number,
): Promise<LoadResult> {
  let n = 0;
  const result = await autocannon({
    url,
    connections: 50,
    duration: seconds,
    ...(rate === undefined ? {} : { overallRate: rate }),
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: ORDER_BODY,
    requests: [
      {
        setupRequest: (request) => ({
          ...request,
          headers: { ...request.headers, 'idempotency-key': keyOf(n++) },
        }),
      },
    ],
  });
  return {
    rps: result.requests.average,
    ok: result['2xx'],
    okRps: result['2xx'] / result.duration,
    p50: result.latency.p50,
    p99: result.latency.p99,
    bad: result.non2xx + result.errors,
    statuses: Object.entries(result.statusCodeStats ?? {})
      .filter(([code]) => !code.startsWith('2'))
      .map(([code, stat]) => `${code}×${stat.count}`),
  };
}
