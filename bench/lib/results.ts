/**
 * Writing a benchmark's results: `bench/results/<name>.md` with every table, each followed by its chart,
 * and the charts as `bench/results/<name>-<n>.svg`.
 */
import { mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type RatioChartOptions, ratioChart } from './chart.js';
import { type BenchRow, formatTable } from './report.js';

/** One part of a results file: a Markdown table, and the rows to chart under it (when it has a chart). */
export interface ResultSection {
  /** The Markdown text (a `formatTable` table, or any other text). */
  text: string;
  /** Chart `rows` as ratios of the first, titled `title`; omit for a section without a chart. */
  chart?: { title: string; rows: BenchRow[] } & RatioChartOptions;
}

/** Where results go unless told otherwise: `bench/results/`. */
export const RESULTS_DIR = fileURLToPath(new URL('../results/', import.meta.url));

/**
 * Write `<dir>/<name>.md` and its charts `<dir>/<name>-1.svg`, `-2.svg`… (numbered in the order of the
 * sections that have one), replacing the charts of an earlier run, so no stale chart outlives its table.
 * @returns The paths written, the Markdown file first.
 */
export function writeResults(
  name: string,
  sections: ResultSection[],
  dir: string = RESULTS_DIR,
): string[] {
  mkdirSync(dir, { recursive: true });
  const stale = new RegExp(`^${name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}-\\d+\\.svg$`);
  for (const file of readdirSync(dir)) if (stale.test(file)) rmSync(join(dir, file));
  const written: string[] = [];
  const markdown: string[] = [];
  let charts = 0;
  for (const section of sections) {
    markdown.push(section.text);
    if (section.chart === undefined) continue;
    const { title, rows, ...options } = section.chart;
    const file = `${name}-${++charts}.svg`;
    writeFileSync(join(dir, file), ratioChart(title, rows, options));
    written.push(join(dir, file));
    markdown.push(`![${title.replace(/[[\]]/g, '')}](./${file})`, '');
  }
  const path = join(dir, `${name}.md`);
  writeFileSync(path, `${markdown.join('\n')}\n`);
  return [path, ...written];
}

/**
 * A results file built table by table: each {@link ResultsFile.table} prints its table at once (a long run
 * shows its figures as they come) and keeps it with its chart; {@link ResultsFile.write} writes them all.
 * @example
 * const results = new ResultsFile('sqlite');
 * results.table('SQLite store, synchronous=NORMAL', 'npx tsx bench/sqlite.ts', rows);
 * results.write();
 */
export class ResultsFile {
  private readonly sections: ResultSection[] = [];

  constructor(private readonly name: string) {}

  /**
   * Print a table of `rows` (ratios against the first) and keep it, with its chart, for the file. The
   * chart is titled `chartTitle` (default: the table's title). `chart: false` keeps the table alone: for a
   * table whose ratios say nothing (the core benchmark's baseline is a bare function call, so every row is
   * ~1% of it; its figure is the overhead in µs).
   */
  table(
    title: string,
    command: string,
    rows: BenchRow[],
    options: RatioChartOptions & { chart?: boolean; chartTitle?: string } = {},
  ): void {
    const { chart = true, chartTitle = title, ...chartOptions } = options;
    const text = formatTable(title, command, rows);
    console.log(text);
    this.sections.push(
      chart ? { text, chart: { title: chartTitle, rows, ...chartOptions } } : { text },
    );
  }

  /** Print Markdown text (a summary table, say) and keep it for the file, without a chart. */
  text(text: string): void {
    console.log(text);
    this.sections.push({ text });
  }

  /** Write `bench/results/<name>.md` and its charts (see {@link writeResults}). */
  write(dir: string = RESULTS_DIR): string[] {
    return writeResults(this.name, this.sections, dir);
  }
}
