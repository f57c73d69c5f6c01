/**
 * The order a bench measures its rows in, round after round.
 *
 * In a fixed order a row's place in its round moves its figure: the same tree measured 18,742 msgs/s as
 * the second Redis row of each round of `consumers.ts` and 21,221 as the fourth (2026-11-27). Rows later
 * in a round ran faster, which flattered a `COMPARE` row named last. Rotated by one place each round, every
 * row takes every place.
 */

/**
 * `rows` rotated by `turn` places (`turn` counts rounds from the first one run, warm-ups included), or as
 * given when `BENCH_ORDER=fixed` (the order earlier sessions measured in).
 */
export function inRoundOrder<T>(rows: readonly T[], turn: number): readonly T[] {
  if (process.env.BENCH_ORDER === 'fixed' || rows.length < 2) return rows;
  const shift = ((turn % rows.length) + rows.length) % rows.length;
  return [...rows.slice(shift), ...rows.slice(0, shift)];
}

/** How the rows were ordered, for a run's command line in its results. */
export function roundOrderNote(): string {
  return process.env.BENCH_ORDER === 'fixed' ? ' BENCH_ORDER=fixed' : '';
}
