/**
 * Retry delays after a handler error: exponential with full jitter, bounded, so a burst of failing messages
 * does not come back in lockstep.
 * @module
 */
import { type Duration, MAX_DURATION_MS, toMs } from '../core/duration.js';
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
 * A backoff function of the user's, its answers checked: each must be a number of ms from 0 to 100 years.
 * Another one (NaN, a negative, Infinity, a string) would reach the broker as is: RabbitMQ closes the
 * channel on a per-message TTL of `'NaN'` or `'-5'` (every delivery on it lost), JetStream redelivers a
 * NaN delay at once, and Redis Streams fails the entry's `XCLAIM`. Thrown instead, it is handled as a
 * backoff that threw: reported to `onBrokerError` and the delivery redelivered after `maxRetryDelay`.
 */
function checkedBackoff(backoff: Backoff): Backoff {
  return (deliveryCount) => {
    const delayMs: unknown = backoff(deliveryCount);
    if (
      typeof delayMs !== 'number' ||
      !Number.isFinite(delayMs) ||
      delayMs < 0 ||
      delayMs > MAX_DURATION_MS
    ) {
      throw new InvalidOptionsError(
        `backoff: the function answered ${shownValue(delayMs)} for delivery ${deliveryCount}; expected a number of ms from 0 to 100 years`,
      );
    }
    return delayMs;
  };
}

/**
 * Build a {@link Backoff} from options, or check a function's answers (see `checkedBackoff`).
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
  if (typeof option === 'function') return checkedBackoff(option);
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
