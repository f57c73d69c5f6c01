/**
 * Helpers shared by the benchmarks: timing loops at a fixed concurrency, and a Markdown table with ratios
 * against a baseline measured in the same run.
 */
import { cpus } from 'node:os';

/** One measured row. */
export interface BenchRow {
  /** What was measured. */
  name: string;
  /** Operations per second. */
  opsPerSec: number;
  /** Median latency per operation in µs, when measured. */
  medianUs?: number;
  /** Extra columns. */
  extra?: Record<string, string>;
}

/**
 * Run `op` `total` times with `concurrency` calls in flight; return ops/s.
 * @param op - Receives the operation's index.
 */
export async function throughput(
  total: number,
  concurrency: number,
  op: (index: number) => Promise<unknown>,
): Promise<number> {
  let next = 0;
  const started = process.hrtime.bigint();
  async function lane() {
    while (next < total) await op(next++);
  }
  await Promise.all(Array.from({ length: concurrency }, lane));
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  return total / seconds;
}

/** Median of a list of numbers. */
export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/**
 * The `rounds` and `same-round ratio (median)` columns of a row measured in interleaved rounds: each round's
 * rate, and the median of each round's rate over the baseline's in that same round, which is steadier than
 * the ratio of medians when the machine's speed drifts from round to round.
 */
export function roundColumns(
  rates: number[],
  baselineRates: number[],
): { rounds: string; 'same-round ratio (median)': string } {
  return {
    rounds: rates.map((r) => Math.round(r).toLocaleString('en-US')).join(' / '),
    'same-round ratio (median)': `${(
      median(rates.map((r, round) => r / (baselineRates[round] ?? Number.NaN))) * 100
    ).toFixed(1)}%`,
  };
}

/**
 * A Markdown table of `rows`; `ratio` is each row's ops/s divided by the first row's (the baseline). The
 * scripts print it and write it with its chart through `./results.ts`.
 */
export function formatTable(title: string, command: string, rows: BenchRow[]): string {
  const base = rows[0]?.opsPerSec ?? 1;
  const extraCols = [...new Set(rows.flatMap((r) => Object.keys(r.extra ?? {})))];
  const header = ['case', 'ops/s', 'ratio vs baseline', 'median µs', ...extraCols];
  const lines = [
    `### ${title}`,
    '',
    `Command: \`${command}\` · ${new Date().toISOString().slice(0, 10)} · Node ${process.version} · ${cpus().length} cores`,
    '',
    `| ${header.join(' | ')} |`,
    `| ${header.map(() => '---').join(' | ')} |`,
    ...rows
      .map((r) =>
        [
          r.name,
          Math.round(r.opsPerSec).toLocaleString('en-US'),
          `${((r.opsPerSec / base) * 100).toFixed(1)}%`,
          r.medianUs === undefined ? '–' : r.medianUs.toFixed(2),
          ...extraCols.map((c) => r.extra?.[c] ?? ''),
        ].join(' | '),
      )
      .map((l) => `| ${l} |`),
    '',
  ];
  return lines.join('\n');
}
