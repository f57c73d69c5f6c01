/**
 * The relay's duration options (`leaseMs`, `pollIntervalMs`, the backoff's `initialMs`, …): milliseconds,
 * or the engine's duration strings (`'500ms'`, `'30s'`, `'24h'`), so that `leaseMs: '30s'`, which the
 * engine's own `leaseMs` takes, means the same thing here. Checked, never coerced.
 * @module
 */
import { type Duration, MAX_DURATION_MS, toMs } from '../core/duration.js';
import { InvalidOptionsError } from '../core/errors.js';
import { shownValue } from '../core/option-checks.js';

/** Bounds of one duration option. */
export interface DurationBounds {
  /** Whether `0` is allowed (it turns a feature off, or means no wait). @default false */
  allowZero?: boolean;
  /**
   * The longest value, in ms (a timer's limit, say). @default 100 years, as the duration parser's: a
   * number past it reached PostgreSQL as an `interval out of range` error, reported like an outage
   */
  maxMs?: number;
}

/**
 * `value` in milliseconds, `fallback` when absent (`undefined` or `null`).
 * @param name - The option as the message names it: `createRelay: leaseMs`.
 * @throws InvalidOptionsError for anything but a number of ms or a duration string within the bounds,
 *   showing the value with its type (a string `"1000"` in quotes: a string takes a unit).
 */
export function durationMs(
  value: Duration | null | undefined,
  name: string,
  fallback: number,
  { allowZero = false, maxMs = MAX_DURATION_MS }: DurationBounds = {},
): number {
  if (value === undefined || value === null) return fallback;
  const refuse = (cause?: unknown) => {
    const sign = allowZero ? 'non-negative' : 'positive';
    const limit = maxMs === MAX_DURATION_MS ? ' of at most 100 years' : ` of at most ${maxMs}`;
    return new InvalidOptionsError(
      `${name}: must be a ${sign} number of ms${limit} or a duration like '30s', got ${shownValue(value)}`,
      { cause },
    );
  };
  let ms: unknown = value;
  if (typeof value === 'string') {
    // The engine's parser, for the same forms; its refusal becomes this message, which also says that a
    // number of ms is taken (a string without a unit is the usual slip: `'1000'` from an env variable).
    try {
      ms = toMs(value, name);
    } catch (error) {
      throw refuse(error);
    }
  }
  // A number is checked here, as before: 0 may be allowed, which the parser refuses.
  if (
    typeof ms !== 'number' ||
    !Number.isFinite(ms) ||
    (allowZero ? ms < 0 : ms <= 0) ||
    ms > maxMs
  ) {
    throw refuse();
  }
  return ms;
}
