/** The benchmarks' results files: each table followed by its chart, and charts that show the ratios. */
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { escapeXml, ratioChart } from '../../../bench/lib/chart.js';
import type { BenchRow } from '../../../bench/lib/report.js';
import { ResultsFile, writeResults } from '../../../bench/lib/results.js';

const rows: BenchRow[] = [
  { name: 'baseline (no idempotency)', opsPerSec: 1000 },
  { name: 'idempotency-kit, redis', opsPerSec: 500 },
  { name: 'idempotency-kit, postgres <variant>', opsPerSec: 1250 },
];

// The bars' widths in drawing order: the first <rect> is the background.
function barWidths(svg: string): number[] {
  return [...svg.matchAll(/<rect x="\d+" y="[\d.]+" width="([\d.]+)"/g)].map((m) => Number(m[1]));
}

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});
function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'idempotency-kit-bench-results-'));
  dirs.push(dir);
  return dir;
}

describe('ratioChart', () => {
  it('draws one bar per row, its length proportional to the ratio to the first row', () => {
    // Act
    const svg = ratioChart('S2', rows);
    // Assert
    const [baseline, half, more] = barWidths(svg);
    expect(barWidths(svg)).toHaveLength(3);
    expect(half! / baseline!).toBeCloseTo(0.5, 2);
    expect(more! / baseline!).toBeCloseTo(1.25, 2);
    expect(svg).toContain('>50.0%<');
    expect(svg).toContain('>125.0%<');
  });

  it('draws the 100% line and each target at its ratio, with its label', () => {
    // Act
    const svg = ratioChart('S2', rows, {
      targets: [
        { ratio: 0.85, label: 'target, Redis' },
        { ratio: 0.7, label: 'target, PostgreSQL' },
      ],
    });
    // Assert
    const lines = [...svg.matchAll(/<line x1="([\d.]+)"/g)].map((m) => Number(m[1]));
    const barStart = 330;
    const [hundred, redis, postgres] = lines.map((x) => x - barStart);
    expect(lines).toHaveLength(3);
    expect(redis! / hundred!).toBeCloseTo(0.85, 2);
    expect(postgres! / hundred!).toBeCloseTo(0.7, 2);
    expect(svg).toContain('target, Redis 85%');
    expect(svg).toContain('target, PostgreSQL 70%');
  });

  it('escapes row names and titles, so any name gives well-formed XML', () => {
    // Act
    const svg = ratioChart('a < b & "c"', rows);
    // Assert
    expect(svg).toContain('a &#60; b &#38; &#34;c&#34;');
    expect(svg).toContain('postgres &#60;variant&#62;');
    expect(svg).not.toMatch(/<variant>/);
    expect(escapeXml(`<>&'"`)).toBe('&#60;&#62;&#38;&#39;&#34;');
  });

  it('names the picture with a title element and an aria-label', () => {
    // Act
    const svg = ratioChart('S1 & more', rows);
    // Assert
    expect(svg.split('\n').slice(0, 2)).toEqual([
      expect.stringMatching(/^<svg [^>]*role="img" aria-label="S1 &#38; more">$/),
      '<title>S1 &#38; more</title>',
    ]);
  });

  it('wraps a long title instead of running it out of the picture', () => {
    // Act
    const svg = ratioChart(`${'word '.repeat(40)}end`, rows);
    // Assert
    const titleLines = [...svg.matchAll(/font-weight="bold">([^<]*)</g)].map((m) => m[1]!);
    expect(titleLines.length).toBeGreaterThan(1);
    expect(Math.max(...titleLines.map((l) => l.length))).toBeLessThanOrEqual(88);
    expect(titleLines.join(' ')).toBe(`${'word '.repeat(40)}end`);
  });
});

describe('writeResults', () => {
  it('writes the Markdown with each charted table followed by its chart, and the SVGs', () => {
    // Arrange
    const dir = tempDir();
    writeFileSync(join(dir, 'http-7.svg'), 'stale');
    writeFileSync(join(dir, 'http-peers-1.svg'), 'another file set');
    // Act
    const written = writeResults(
      'http',
      [
        { text: '### S1 table\n', chart: { title: 'S1', rows } },
        { text: '### summary\n' },
        { text: '### S2 table\n', chart: { title: 'S2 [x]', rows } },
      ],
      dir,
    );
    // Assert
    expect(written.map((p) => p.slice(dir.length + 1))).toEqual([
      'http.md',
      'http-1.svg',
      'http-2.svg',
    ]);
    expect(readdirSync(dir).sort()).toEqual([
      'http-1.svg',
      'http-2.svg',
      'http-peers-1.svg',
      'http.md',
    ]);
    expect(readFileSync(join(dir, 'http.md'), 'utf8')).toBe(
      '### S1 table\n\n![S1](./http-1.svg)\n\n### summary\n\n### S2 table\n\n![S2 x](./http-2.svg)\n\n',
    );
    expect(readFileSync(join(dir, 'http-2.svg'), 'utf8')).toBe(ratioChart('S2 [x]', rows));
  });

  it('ResultsFile keeps every table it printed and writes them with their charts', () => {
    // Arrange
    const dir = tempDir();
    const results = new ResultsFile('core');
    const log = console.log;
    const printed: string[] = [];
    console.log = (text: string) => printed.push(text);
    // Act
    try {
      results.table('first', 'npx tsx bench/core.ts', rows);
      results.table('second', 'npx tsx bench/core.ts', rows, {
        targets: [{ ratio: 0.9, label: 'target' }],
      });
    } finally {
      console.log = log;
    }
    results.write(dir);
    // Assert
    const markdown = readFileSync(join(dir, 'core.md'), 'utf8');
    expect(printed).toHaveLength(2);
    expect(markdown).toContain(printed[0]!);
    expect(markdown).toContain(printed[1]!);
    expect(markdown.indexOf('![first](./core-1.svg)')).toBeGreaterThan(
      markdown.indexOf('### first'),
    );
    expect(readFileSync(join(dir, 'core-2.svg'), 'utf8')).toContain('target 90%');
  });

  it('ResultsFile titles a chart apart from its table, and keeps plain text without a chart', () => {
    // Arrange
    const dir = tempDir();
    const results = new ResultsFile('http-peers');
    const log = console.log;
    const printed: string[] = [];
    console.log = (text: string) => printed.push(text);
    // Act
    try {
      results.table('HTTP vs peers: S2 (a long table title)', 'npx tsx bench/http-peers.ts', rows, {
        chartTitle: 'S2',
      });
      results.text('### summary\n');
    } finally {
      console.log = log;
    }
    results.write(dir);
    // Assert
    expect(readdirSync(dir).sort()).toEqual(['http-peers-1.svg', 'http-peers.md']);
    expect(readFileSync(join(dir, 'http-peers-1.svg'), 'utf8')).toBe(ratioChart('S2', rows));
    expect(printed[1]).toBe('### summary\n');
    expect(readFileSync(join(dir, 'http-peers.md'), 'utf8')).toMatch(
      /!\[S2\]\(\.\/http-peers-1\.svg\)\n\n### summary\n\n$/,
    );
  });

  it('ResultsFile writes a table without a chart when asked to', () => {
    // Arrange
    const dir = tempDir();
    const results = new ResultsFile('core');
    const log = console.log;
    console.log = () => {};
    // Act
    try {
      results.table('overhead', 'npx tsx bench/core.ts', rows, { chart: false });
    } finally {
      console.log = log;
    }
    results.write(dir);
    // Assert
    expect(readdirSync(dir)).toEqual(['core.md']);
    expect(readFileSync(join(dir, 'core.md'), 'utf8')).not.toContain('![');
  });
});
