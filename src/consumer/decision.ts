/**
 * The consumer decision policy, with no I/O: given what happened to one delivery, say whether to ack it,
 * redeliver it later or dead-letter it. Every broker adapter executes these decisions and makes none.
 * @module
 */

import { describeError } from '../core/describe-error.js';
import type { StoredErrorInfo } from '../core/errors.js';
import type { Backoff } from './backoff.js';

/** What happened when a delivery was run through the engine. */
export type AttemptResult =
  /** The handler ran and its completion is durable in the store. */
  | { kind: 'executed' }
  /** The key was already completed: a duplicate. */
  | { kind: 'replayed' }
  /**
   * An earlier execution stored its error as final. Consumers run with `storeErrors: false`, so only a
   * record written otherwise (by an older version, or another caller of the same scope) gives this.
   */
  | { kind: 'replayed_error'; error: unknown }
  /** Another delivery holds the key right now; its lease ends in `retryAfterMs`. */
  | { kind: 'in_progress'; retryAfterMs: number }
  /** The key was used before with a different fingerprint (payload). */
  | { kind: 'mismatch' }
  /** No idempotency key could be extracted, or it is not a valid key. */
  | { kind: 'invalid_key'; error: unknown }
  /**
   * The store failed: nothing ran (fail closed), or the handler rethrew the `StoreUnavailableError` a step
   * threw because the store failed under it (the claim is then left to its lease).
   */
  | { kind: 'store_unavailable'; error: unknown; retryAfterMs: number }
  /** The handler ran, but its completion was fenced out: another delivery took the key over. */
  | { kind: 'lease_lost'; error: unknown }
  /** The handler threw; the engine released the claim. */
  | { kind: 'handler_error'; error: unknown };

/** Why a delivery is redelivered later. */
export const RetryReason = {
  InProgress: 'in_progress',
  StoreUnavailable: 'store_unavailable',
  HandlerError: 'handler_error',
  LeaseLost: 'lease_lost',
} as const;

/** One of the {@link RetryReason} values. */
export type RetryReason = (typeof RetryReason)[keyof typeof RetryReason];

/** Why a delivery is dead-lettered. */
export const DeadLetterReason = {
  /** The handler failed on the last allowed delivery, or with an error marked permanent. */
  HandlerError: 'handler_error',
  /** The key was reused with a different payload: retrying can never succeed. */
  Mismatch: 'mismatch',
  /** No valid idempotency key: the message cannot be deduplicated. */
  InvalidKey: 'invalid_key',
  /**
   * The handler failed with deliveries left, but the adapter cannot redeliver the message later unchanged
   * (RabbitMQ: its own headers leave no room in amqplib's 64 KB header table for a retry copy's, and a
   * copy without some of them would run the handler on another message). Dead-lettered at once with the
   * handler's error, rather than held unacked on the channel for good.
   */
  HeadersTooLarge: 'headers_too_large',
} as const;

/** One of the {@link DeadLetterReason} values. */
export type DeadLetterReason = (typeof DeadLetterReason)[keyof typeof DeadLetterReason];

/** What the adapter must do with the delivery. */
export type Decision =
  | { action: 'ack'; reason: 'executed' | 'duplicate' }
  | { action: 'retry'; reason: RetryReason; delayMs: number; error?: unknown }
  | { action: 'dead_letter'; reason: DeadLetterReason; error: StoredErrorInfo };

/** The resolved settings {@link decide} needs. */
export interface DecisionPolicy {
  /** Deliveries allowed before a failing message is dead-lettered (≥ 1). */
  maxDeliveries: number;
  /** Delay before redelivering after a handler error. */
  backoff: Backoff;
  /** Shortest delay of an in-progress / store-unavailable redelivery. */
  minRetryDelayMs: number;
  /** Longest delay of an in-progress / store-unavailable redelivery. */
  maxRetryDelayMs: number;
  /** Errors that are dead-lettered at once, without retries. */
  isPermanentError: (error: unknown) => boolean;
}

// Redeliver just after the holder's lease ends, not exactly at it: by then a crashed holder's claim can be
// taken over instead of bouncing once more.
const LEASE_MARGIN_MS = 50;

const clamp = (value: number, min: number, max: number) => Math.min(Math.max(value, min), max);

/**
 * Delay of an in-progress redelivery: short at first, doubling with each delivery, and never later than
 * just after the holder's lease ends. A live holder usually finishes soon, so the duplicate is settled
 * quickly; a crashed holder's claim is taken over as soon as its lease allows.
 */
function inProgressDelay(retryAfterMs: number, deliveryCount: number, policy: DecisionPolicy) {
  const growing = policy.minRetryDelayMs * 2 ** Math.min(Math.max(deliveryCount - 1, 0), 20);
  return clamp(
    Math.min(growing, retryAfterMs + LEASE_MARGIN_MS),
    policy.minRetryDelayMs,
    policy.maxRetryDelayMs,
  );
}

// The decisions without data, shared rather than allocated per message.
const ACK_EXECUTED: Decision = Object.freeze({ action: 'ack', reason: 'executed' });
const ACK_DUPLICATE: Decision = Object.freeze({ action: 'ack', reason: 'duplicate' });

/**
 * Decide what to do with one delivery.
 *
 * - executed → ack (the engine resolves only once completion is durable);
 * - duplicate → ack;
 * - a stored error record (not written by a consumer) → dead-letter at once with that error;
 * - in progress elsewhere, or store unavailable → redeliver later, never ack: the holder may die, and then
 *   this copy is the one that must run;
 * - lease lost → redeliver later: the redelivery is deduplicated against whoever completed;
 * - handler error → retry with backoff until `maxDeliveries`, then dead-letter (at once if permanent);
 * - mismatch or no usable key → dead-letter: retrying can never succeed.
 * @param deliveryCount - Deliveries of this message so far, this one included (≥ 1).
 * @param heldRetries - Retries of this delivery waited out in place (`Delivery.heldRetries`): counted as
 *   deliveries into an in-progress retry's delay, and into nothing else.
 */
export function decide(
  result: AttemptResult,
  deliveryCount: number,
  policy: DecisionPolicy,
  heldRetries = 0,
): Decision {
  switch (result.kind) {
    case 'executed':
      return ACK_EXECUTED;
    case 'replayed':
      return ACK_DUPLICATE;
    case 'replayed_error':
      // The handler failed and the record says so for good: acking would drop the message unnoticed, and
      // retrying would meet the same record until it expires. Dead-letter it with the error recorded.
      return {
        action: 'dead_letter',
        reason: DeadLetterReason.HandlerError,
        error: describeError(result.error),
      };
    case 'in_progress':
      return {
        action: 'retry',
        reason: RetryReason.InProgress,
        delayMs: inProgressDelay(result.retryAfterMs, deliveryCount + heldRetries, policy),
      };
    case 'store_unavailable':
      return {
        action: 'retry',
        reason: RetryReason.StoreUnavailable,
        delayMs: clamp(result.retryAfterMs, policy.minRetryDelayMs, policy.maxRetryDelayMs),
        error: result.error,
      };
    case 'lease_lost':
      return {
        action: 'retry',
        reason: RetryReason.LeaseLost,
        delayMs: policy.minRetryDelayMs,
        error: result.error,
      };
    case 'mismatch':
      return {
        action: 'dead_letter',
        reason: DeadLetterReason.Mismatch,
        error: {
          name: 'MismatchError',
          message: 'The idempotency key was already used with a different payload',
          code: 'mismatch',
        },
      };
    case 'invalid_key':
      return {
        action: 'dead_letter',
        reason: DeadLetterReason.InvalidKey,
        error: describeError(result.error),
      };
    case 'handler_error':
      if (policy.isPermanentError(result.error) || deliveryCount >= policy.maxDeliveries) {
        return {
          action: 'dead_letter',
          reason: DeadLetterReason.HandlerError,
          error: describeError(result.error),
        };
      }
      return {
        action: 'retry',
        reason: RetryReason.HandlerError,
        delayMs: policy.backoff(deliveryCount),
        error: result.error,
      };
  }
}
