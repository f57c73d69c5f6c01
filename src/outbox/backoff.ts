/**
 * Retry delays for failed publishes: exponential, capped, with jitter so that relays retrying the same
 * broker outage do not all come back at the same instant.
 * @module
 */
import type { Duration } from '../core/duration.js';
import { InvalidOptionsError } from '../core/errors.js';
import { knownFields, shownValue } from '../core/option-checks.js';
import { durationMs } from './durations.js';

/** How long a row waits after a failed publish before it may be claimed again. */
export interface BackoffOptions {
  /** Delay after the first failure: ms, or a duration string (`'1s'`). @default 1000 */
  initialMs?: Duration;
  /** Upper bound of the delay: ms, or a duration string (`'1m'`). @default 60000 */
  maxMs?: Duration;
  /** Growth per further failure. @default 2 */
  multiplier?: number;
  /** Fraction of the delay that is randomised (0 = none, 1 = anywhere between 0 and the delay). @default 0.2 */
  jitter?: number;
}

/** Computes the delay after the `attempt`-th failed attempt (1-based). */
export type Backoff = (attempt: number) => number;

// The fields of BackoffOptions, which exponentialBackoff accepts and no others.
const BACKOFF_FIELDS = ['initialMs', 'maxMs', 'multiplier', 'jitter'] as const;

/**
 * A consumer's backoff takes the same settings under other names. Each side used to ignore the other's
 * names in silence, running its defaults: now they are refused, saying so.
 */
const CONSUMER_NAMES = {
  owner: "a consumer's backoff",
  names: { initial: 'initialMs', max: 'maxMs', factor: 'multiplier' },
};

/**
 * Build a backoff function: `min(maxMs, initialMs × multiplier^(attempt−1))`, minus up to `jitter` of it.
 * @throws InvalidOptionsError for a field that is not one of {@link BackoffOptions} (a consumer's
 *   `initial`, `max` and `factor` included), a value of the wrong type, negative delays, `maxMs` below
 *   `initialMs`, a multiplier below 1 or a jitter outside [0, 1].
 * @example
 * const delay = exponentialBackoff({ initialMs: 500, maxMs: '30s' });
 * delay(1); // ≈ 400–500
 * delay(4); // ≈ 3200–4000
 */
export function exponentialBackoff(
  options: BackoffOptions = {},
  random: () => number = Math.random,
): Backoff {
  const fields = backoffFields(options);
  const initialMs = durationMs(fields.initialMs, 'backoff.initialMs', 1000, { allowZero: true });
  const maxMs = durationMs(fields.maxMs, 'backoff.maxMs', 60_000, { allowZero: true });
  const multiplier = fields.multiplier ?? 2;
  const jitter = fields.jitter ?? 0.2;
  if (maxMs < initialMs) {
    throw new InvalidOptionsError(
      `backoff: need initialMs <= maxMs, got initialMs ${initialMs} and maxMs ${maxMs}`,
    );
  }
  if (typeof multiplier !== 'number' || !Number.isFinite(multiplier) || multiplier < 1) {
    throw new InvalidOptionsError(
      `backoff.multiplier: must be a number >= 1, got ${shownValue(multiplier)}`,
    );
  }
  if (typeof jitter !== 'number' || !(jitter >= 0 && jitter <= 1)) {
    // true or false is a consumer's jitter (on or off); here it is how much of the delay is random.
    const hint = typeof jitter === 'boolean' ? " (true or false is a consumer's jitter)" : '';
    throw new InvalidOptionsError(
      `backoff.jitter: must be a fraction in [0, 1], got ${shownValue(jitter)}${hint}`,
    );
  }
  return (attempt) => {
    const exponent = Math.max(0, Math.floor(attempt) - 1);
    // multiplier ** exponent reaches Infinity near attempt 1025; 0 × Infinity is NaN, which the relay
    // reported as a broken backoff (and replaced by the default) although a zero delay was asked for.
    const base = initialMs === 0 ? 0 : Math.min(maxMs, initialMs * multiplier ** exponent);
    return Math.round(base * (1 - jitter * random()));
  };
}

// An options object with no fields but the documented ones; absent (undefined or null) is the defaults.
function backoffFields(options: unknown): BackoffOptions {
  if (options === undefined || options === null) return {};
  if (typeof options !== 'object' || Array.isArray(options)) {
    throw new InvalidOptionsError(
      `backoff: expected { ${BACKOFF_FIELDS.join(', ')} } or a function of the attempt, got ${shownValue(options)}`,
    );
  }
  knownFields(options, 'backoff', BACKOFF_FIELDS, CONSUMER_NAMES);
  return options as BackoffOptions;
}
