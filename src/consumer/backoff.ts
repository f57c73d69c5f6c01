/**
 * Retry delays after a handler error: exponential with full jitter, bounded, so a burst of failing messages
 * does not come back in lockstep.
 * @module
 */
import { type Duration, toMs } from '../core/duration.js';
import { InvalidOptionsError } from '../core/errors.js';

/** Exponential backoff settings. */
export interface BackoffOptions {
  /** Delay before the second delivery. @default '1s' */
  initial?: Duration;
  /** Multiplier per further delivery. @default 2 */
  factor?: number;
  /** Longest delay. @default '1m' */
  max?: Duration;
  /** Randomise each delay within [delay/2, delay] so retries spread out. @default true */
  jitter?: boolean;
}

/** A backoff: the delay before the next delivery, given how many deliveries have happened (≥ 1). */
export type Backoff = (deliveryCount: number) => number;

/**
 * Build a {@link Backoff} from options, or pass a function through.
 * @example
 * const backoff = createBackoff({ initial: '500ms', factor: 3, max: '30s' });
 * backoff(1); // ≈ 250–500 ms
 */
export function createBackoff(
  option: BackoffOptions | Backoff | undefined,
  random: () => number = Math.random,
): Backoff {
  if (typeof option === 'function') return option;
  const initial = toMs(option?.initial ?? '1s', 'backoff.initial');
  const max = toMs(option?.max ?? '1m', 'backoff.max');
  const factor = option?.factor ?? 2;
  if (!Number.isFinite(factor) || factor < 1) {
    throw new InvalidOptionsError(`backoff.factor: must be a number ≥ 1, got ${String(factor)}`);
  }
  const jitter = option?.jitter ?? true;
  return (deliveryCount) => {
    const exponent = Math.max(deliveryCount - 1, 0);
    const delay = Math.min(initial * factor ** exponent, max);
    return Math.ceil(jitter ? delay / 2 + (random() * delay) / 2 : delay);
  };
}
