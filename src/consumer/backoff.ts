/**
 * Retry delays after a handler error: exponential with full jitter, bounded, so a burst of failing messages
 * does not come back in lockstep.
 * @module
 */
import { type Duration, toMs } from '../core/duration.js';
import { InvalidOptionsError } from '../core/errors.js';
import { booleanOption, knownFields, shownValue } from '../core/option-checks.js';

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
 * @throws InvalidOptionsError for a field that is not one of {@link BackoffOptions} (the outbox relay's
 *   `initialMs`, `maxMs` and `multiplier` included) or a value of the wrong type or range.
 * @example
 * const backoff = createBackoff({ initial: '500ms', factor: 3, max: '30s' });
 * backoff(1); // ≈ 250–500 ms
 */
export function createBackoff(
  option: BackoffOptions | Backoff | undefined,
  random: () => number = Math.random,
): Backoff {
  if (typeof option === 'function') return option;
  const fields = backoffFields(option);
  const initial = toMs(fields.initial ?? '1s', 'backoff.initial');
  const max = toMs(fields.max ?? '1m', 'backoff.max');
  const factor = fields.factor ?? 2;
  if (typeof factor !== 'number' || !Number.isFinite(factor) || factor < 1) {
    throw new InvalidOptionsError(
      `backoff.factor: must be a number ≥ 1, got ${shownValue(factor)}`,
    );
  }
  const jitter = jitterOption(fields.jitter);
  return (deliveryCount) => {
    const exponent = Math.max(deliveryCount - 1, 0);
    const delay = Math.min(initial * factor ** exponent, max);
    return Math.ceil(jitter ? delay / 2 + (random() * delay) / 2 : delay);
  };
}

// The fields of BackoffOptions, which createBackoff accepts and no others.
const BACKOFF_FIELDS = ['initial', 'max', 'factor', 'jitter'] as const;

/**
 * The outbox relay's backoff takes the same settings under other names (its durations are in ms). Each
 * side used to ignore the other's names in silence, running its defaults: now they are refused, saying so.
 */
const RELAY_NAMES = {
  owner: 'the outbox relay',
  names: { initialMs: 'initial', maxMs: 'max', multiplier: 'factor' },
};

// An options object with no fields but the documented ones; absent (undefined or null) is the defaults.
function backoffFields(option: unknown): BackoffOptions {
  if (option === undefined || option === null) return {};
  if (typeof option !== 'object' || Array.isArray(option)) {
    throw new InvalidOptionsError(
      `backoff: expected { ${BACKOFF_FIELDS.join(', ')} } or a function of the delivery count, got ${shownValue(option)}`,
    );
  }
  knownFields(option, 'backoff', BACKOFF_FIELDS, RELAY_NAMES);
  return option as BackoffOptions;
}

// A consumer's jitter is on or off; a number is the relay's form (the fraction of the delay randomised).
function jitterOption(value: unknown): boolean {
  if (typeof value === 'number') {
    throw new InvalidOptionsError(
      `backoff.jitter: expected true or false, got ${value} (a fraction is the outbox relay's jitter; a consumer's randomises each delay within [delay/2, delay] when true)`,
    );
  }
  return booleanOption(value, 'backoff.jitter', true);
}
