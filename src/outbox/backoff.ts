/**
 * Retry delays for failed publishes: exponential, capped, with jitter so that relays retrying the same
 * broker outage do not all come back at the same instant.
 * @module
 */
import { InvalidOptionsError } from '../core/errors.js';

/** How long a row waits after a failed publish before it may be claimed again. */
export interface BackoffOptions {
  /** Delay after the first failure. @default 1000 */
  initialMs?: number;
  /** Upper bound of the delay. @default 60000 */
  maxMs?: number;
  /** Growth per further failure. @default 2 */
  multiplier?: number;
  /** Fraction of the delay that is randomised (0 = none, 1 = anywhere between 0 and the delay). @default 0.2 */
  jitter?: number;
}

/** Computes the delay after the `attempt`-th failed attempt (1-based). */
export type Backoff = (attempt: number) => number;

/**
 * Build a backoff function: `min(maxMs, initialMs × multiplier^(attempt−1))`, minus up to `jitter` of it.
 * @throws InvalidOptionsError on negative delays, a multiplier below 1 or a jitter outside [0, 1].
 * @example
 * const delay = exponentialBackoff({ initialMs: 500, maxMs: 30_000 });
 * delay(1); // ≈ 400–500
 * delay(4); // ≈ 3200–4000
 */
export function exponentialBackoff(
  options: BackoffOptions = {},
  random: () => number = Math.random,
): Backoff {
  const initialMs = options.initialMs ?? 1000;
  const maxMs = options.maxMs ?? 60_000;
  const multiplier = options.multiplier ?? 2;
  const jitter = options.jitter ?? 0.2;
  if (!(initialMs >= 0) || !(maxMs >= initialMs)) {
    throw new InvalidOptionsError('backoff: need 0 <= initialMs <= maxMs');
  }
  if (!(multiplier >= 1)) throw new InvalidOptionsError('backoff: multiplier must be >= 1');
  if (!(jitter >= 0 && jitter <= 1))
    throw new InvalidOptionsError('backoff: jitter must be in [0, 1]');
  return (attempt) => {
    const exponent = Math.max(0, Math.floor(attempt) - 1);
    const base = Math.min(maxMs, initialMs * multiplier ** exponent);
    return Math.round(base * (1 - jitter * random()));
  };
}
