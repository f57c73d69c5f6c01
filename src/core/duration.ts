/**
 * Durations given as milliseconds or as short strings (`'500ms'`, `'30s'`, `'5m'`, `'24h'`, `'7d'`).
 * @module
 */
import { InvalidOptionsError } from './errors.js';

/** A duration: milliseconds, or a string such as `'30s'` or `'24h'`. */
export type Duration = number | `${number}${DurationUnit}`;

/** Units accepted in a duration string. */
export type DurationUnit = 'ms' | 's' | 'm' | 'h' | 'd';

const UNIT_MS: Record<DurationUnit, number> = {
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
  d: 86_400_000,
};
const PATTERN = /^(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)$/;

/**
 * The longest delay Node's timers take (2³¹−1 ms, about 24.8 days): a longer one fires at once, with a
 * warning, so a timeout or a poll interval above it fails every call or spins.
 */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * The longest duration anything accepts: 100 years, in ms. Longer ones are mistakes (a unit slip, seconds
 * given as ms twice over) that the backends would refuse mid-call: PostgreSQL's intervals and Redis's
 * expiry times have ranges, and their errors would read like an outage.
 */
export const MAX_DURATION_MS = 100 * 365.25 * 86_400_000;

/**
 * Convert a {@link Duration} to whole milliseconds.
 * @param name - The option's name, used in the error message.
 * @throws InvalidOptionsError when the value is not a positive finite duration of at most 100 years (nor a
 *   number or a string at all).
 */
export function toMs(value: Duration, name: string): number {
  let ms: number;
  if (typeof value === 'number') {
    ms = value;
  } else if (typeof value !== 'string') {
    // Options often come from configuration files and environment parsing, typed or not.
    throw new InvalidOptionsError(
      `${name}: must be a number of ms or a string like '500ms', '30s' or '24h', got ${describe(value)}`,
    );
  } else {
    const match = PATTERN.exec(value.trim());
    if (!match) {
      throw new InvalidOptionsError(
        `${name}: '${value}' is not a duration like '500ms', '30s' or '24h'`,
      );
    }
    ms = Number(match[1]) * UNIT_MS[match[2] as DurationUnit];
  }
  if (!Number.isFinite(ms) || ms <= 0 || ms > MAX_DURATION_MS) {
    throw new InvalidOptionsError(
      `${name}: must be a positive duration of at most 100 years, got ${shown(value)}`,
    );
  }
  return Math.ceil(ms);
}

// A duration out of range, for a message: a string in quotes (`"0s"`), as the option checks show strings,
// so that `'0s'` from a config file reads as the string it is.
const shown = (value: number | string) =>
  typeof value === 'string' ? JSON.stringify(value) : String(value);

/** A value of the wrong type, for a message: `true`, `10n`, `an object`. */
function describe(value: unknown): string {
  if (typeof value === 'bigint') return `${value}n`;
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'object' && value !== null) return 'an object';
  if (typeof value === 'function') return 'a function';
  return String(value);
}
