/**
 * The chart beside each results table: one horizontal bar per row, its length the row's ratio to the
 * baseline (the first row), with the 100 % line drawn across, as a standalone SVG that any Markdown viewer
 * shows and a diff can still read (no script, no external font, one element per bar).
 */
import type { BenchRow } from './report.js';

/** A ratio to mark with its own line, such as a figure an issue asks for. */
export interface ChartTarget {
  /** The ratio (1 = the baseline). */
  ratio: number;
  /** What it is, e.g. `'target, Redis'`. */
  label: string;
}

/** Options of {@link ratioChart}. */
export interface RatioChartOptions {
  /** Ratios to mark with lines of their own, besides the baseline's 100 %. */
  targets?: ChartTarget[];
}

// Geometry, in SVG user units (pixels at 100 %).
const WIDTH = 760;
const LABEL_WIDTH = 330;
const VALUE_WIDTH = 60;
const BAR_AREA = WIDTH - LABEL_WIDTH - VALUE_WIDTH - 20;
const ROW_HEIGHT = 24;
// Space above the bars for the subtitle; the title's lines come on top of it.
const HEADER = 44;
const TITLE_LINE = 18;
// Characters per title line at 14 px bold in the chart's width.
const TITLE_CHARS = 88;
const BOTTOM = 26;
const BASELINE_COLOUR = '#8c8c8c';
const ROW_COLOUR = '#3b6fb6';
const LINE_COLOUR = '#333333';
const TARGET_COLOUR = '#c0392b';

/**
 * An SVG bar chart of `rows` as ratios of the first row's ops/s. The scale runs from 0 to the largest of
 * the ratios, the targets and 100 %, plus a margin, so the reference lines are always inside the chart.
 * @example
 * writeFileSync('http-1.svg', ratioChart('S1', rows, { targets: [{ ratio: 0.99, label: 'target' }] }));
 */
export function ratioChart(
  title: string,
  rows: BenchRow[],
  options: RatioChartOptions = {},
): string {
  const base = rows[0]?.opsPerSec ?? 0;
  const ratios = rows.map((row) => (base > 0 ? row.opsPerSec / base : 0));
  const titleLines = wrap(title, TITLE_CHARS);
  const top = HEADER + (titleLines.length - 1) * TITLE_LINE;
  const targets = options.targets ?? [];
  const scaleMax = Math.max(1, ...targets.map((t) => t.ratio), ...ratios) * 1.08;
  const x = (ratio: number) => LABEL_WIDTH + (ratio / scaleMax) * BAR_AREA;
  const height = top + rows.length * ROW_HEIGHT + BOTTOM * (1 + targets.length);
  // The title element and the label name the picture for screen readers (and Biome's a11y lint).
  const parts = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}" font-family="sans-serif" font-size="12" role="img" aria-label="${escapeXml(title)}">`,
    `<title>${escapeXml(title)}</title>`,
    `<rect width="${WIDTH}" height="${height}" fill="#ffffff"/>`,
    ...titleLines.map(
      (line, index) =>
        `<text x="10" y="${20 + index * TITLE_LINE}" font-size="14" font-weight="bold">${escapeXml(line)}</text>`,
    ),
    `<text x="10" y="${top - 8}" fill="#555555">ops/s as a share of the baseline (first row), same run</text>`,
  ];
  rows.forEach((row, index) => {
    const y = top + index * ROW_HEIGHT;
    const ratio = ratios[index]!;
    const colour = index === 0 ? BASELINE_COLOUR : ROW_COLOUR;
    parts.push(
      `<text x="${LABEL_WIDTH - 8}" y="${y + 16}" text-anchor="end">${escapeXml(shorten(row.name))}</text>`,
      `<rect x="${LABEL_WIDTH}" y="${y + 4}" width="${(x(ratio) - LABEL_WIDTH).toFixed(1)}" height="${ROW_HEIGHT - 8}" fill="${colour}"/>`,
      `<text x="${(x(ratio) + 6).toFixed(1)}" y="${y + 16}">${(ratio * 100).toFixed(1)}%</text>`,
    );
  });
  const chartBottom = top + rows.length * ROW_HEIGHT;
  parts.push(referenceLine(x(1), top, chartBottom, 0, LINE_COLOUR, '100%'));
  // Each target's label gets its own line below the chart, so close targets never overprint.
  targets.forEach((target, index) => {
    const label = `${target.label} ${(target.ratio * 100).toFixed(0)}%`;
    parts.push(referenceLine(x(target.ratio), top, chartBottom, index + 1, TARGET_COLOUR, label));
  });
  parts.push('</svg>', '');
  return parts.join('\n');
}

// A dashed vertical line across the bars, labelled below them on label line `labelLine` (0, 1, …).
function referenceLine(
  atX: number,
  top: number,
  bottom: number,
  labelLine: number,
  colour: string,
  label: string,
): string {
  const x = atX.toFixed(1);
  const labelY = bottom + 16 + labelLine * BOTTOM;
  return [
    `<line x1="${x}" y1="${top - 2}" x2="${x}" y2="${labelY - 12}" stroke="${colour}" stroke-dasharray="4 3"/>`,
    `<text x="${x}" y="${labelY}" text-anchor="middle" fill="${colour}">${escapeXml(label)}</text>`,
  ].join('\n');
}

// Greedy word wrap; a single word longer than a line gets a line of its own.
function wrap(text: string, width: number): string[] {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(' ')) {
    if (line !== '' && line.length + 1 + word.length > width) {
      lines.push(line);
      line = word;
    } else {
      line = line === '' ? word : `${line} ${word}`;
    }
  }
  if (line !== '') lines.push(line);
  return lines;
}

// Row names such as "idempotency-kit, postgres [variant]" fit; longer ones are cut, not wrapped.
function shorten(name: string): string {
  return name.length <= 48 ? name : `${name.slice(0, 47)}…`;
}

/** Escape the five characters XML gives a meaning to. */
export function escapeXml(text: string): string {
  return text.replace(/[<>&'"]/g, (c) => `&#${c.charCodeAt(0)};`);
}
