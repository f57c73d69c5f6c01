/**
 * Runs one delivery through the engine and carries out the decision: the one place where consumer policy
 * meets broker operations. Adapters describe a delivery (how to ack, redeliver later, dead-letter and keep
 * the broker's timer alive) and call {@link processDelivery}.
 * @module
 */
import {
  isInvalidKeyError,
  isLeaseLostError,
  isReplayedError,
  isStoreUnavailableError,
  type StoredErrorInfo,
} from '../core/errors.js';
import { type AttemptResult, type DeadLetterReason, type Decision, decide } from './decision.js';
import type {
  ConsumerEvent,
  ConsumerHandler,
  ConsumerHooks,
  ResolvedConsumerOptions,
} from './options.js';

/** What is recorded with a dead-lettered message. */
export interface DeadLetter {
  /** The consumer's name. */
  consumer: string;
  /** The message's idempotency key, when it had one. */
  key: string | undefined;
  /** Why it was dead-lettered. */
  reason: DeadLetterReason;
  /** The last error. */
  error: StoredErrorInfo;
  /** Deliveries made, the last one included. */
  deliveryCount: number;
  /** When, as an ISO 8601 string. */
  failedAt: string;
}

/** One delivery as an adapter presents it: the message and the broker operations to settle it. */
export interface Delivery<M> {
  /** The broker's message. */
  message: M;
  /** Deliveries of this message so far, this one included (≥ 1). */
  deliveryCount: number;
  /** Acknowledge: the message is done. */
  ack(): Promise<void> | void;
  /** Have the broker deliver the message again after `delayMs`, without acking it for good. */
  retry(delayMs: number): Promise<void> | void;
  /** Move the message to the dead-letter destination with `letter` recorded, then settle it. */
  deadLetter(letter: DeadLetter): Promise<void> | void;
  /** Reset the broker's own redelivery timer while the handler runs (JetStream `working()`). */
  touch?(): Promise<void> | void;
  /** How often to call `touch`. */
  touchIntervalMs?: number;
}

function emitHook<M, K extends keyof ConsumerHooks<M>>(
  hooks: ConsumerHooks<M>,
  name: K,
  event: Parameters<NonNullable<ConsumerHooks<M>[K]>>[0],
): void {
  const hook = hooks[name] as ((e: typeof event) => void) | undefined;
  if (hook === undefined) return;
  try {
    hook(event);
  } catch {
    // Observability must never change a decision.
  }
}

function extractKey<M>(
  options: ResolvedConsumerOptions<M>,
  message: M,
): { key: string } | { error: unknown } {
  try {
    const key = options.key(message);
    if (key === undefined || key === '')
      return { error: new Error('The message has no idempotency key') };
    return { key };
  } catch (error) {
    return { error };
  }
}

/** Run the handler under the engine and classify what happened. Never rejects. */
async function attempt<M>(
  options: ResolvedConsumerOptions<M>,
  handler: ConsumerHandler<M>,
  delivery: Delivery<M>,
  key: string,
): Promise<AttemptResult> {
  // The handler's own error is told apart by identity: a handler may well throw a `StoreUnavailableError`
  // of its own, which must count as a handler failure, not as this consumer's store being down.
  let handlerError: { error: unknown } | undefined;
  try {
    const fingerprint = options.fingerprint?.(delivery.message);
    const outcome = await options.engine.run(
      {
        key,
        scope: options.scope,
        ...(fingerprint === undefined ? {} : { fingerprint }),
        ...(options.leaseMs === undefined ? {} : { leaseMs: options.leaseMs }),
        ...(options.retentionMs === undefined ? {} : { retentionMs: options.retentionMs }),
      },
      async (context) => {
        const timer = startTouching(options, delivery);
        try {
          await handler(delivery.message, {
            key,
            deliveryCount: delivery.deliveryCount,
            // A getter, so the engine only creates the AbortSignal for handlers that use it.
            get signal() {
              return context.signal;
            },
            token: context.token,
            attempt: context.attempt,
            extendLease: context.extendLease,
            downstreamKey: context.downstreamKey,
          });
        } catch (error) {
          handlerError = { error };
          throw error;
        } finally {
          if (timer !== undefined) clearInterval(timer);
        }
        // Consumers only need "done": nothing is stored, so records stay a few bytes.
        return undefined;
      },
    );
    switch (outcome.status) {
      case 'executed':
        return { kind: 'executed' };
      case 'replayed':
        return { kind: 'replayed' };
      case 'in_progress':
        return { kind: 'in_progress', retryAfterMs: outcome.retryAfterMs };
      case 'mismatch':
        return { kind: 'mismatch' };
    }
  } catch (error) {
    if (handlerError !== undefined && handlerError.error === error) {
      return { kind: 'handler_error', error };
    }
    if (isInvalidKeyError(error)) return { kind: 'invalid_key', error };
    if (isStoreUnavailableError(error)) {
      return { kind: 'store_unavailable', error, retryAfterMs: error.retryAfterMs };
    }
    if (isLeaseLostError(error)) return { kind: 'lease_lost', error };
    if (isReplayedError(error)) return { kind: 'replayed_error', error };
    // Anything else (a fingerprint function that threw, say) is treated like a handler failure: retried,
    // then dead-lettered with the error recorded.
    return { kind: 'handler_error', error };
  }
}

function startTouching<M>(
  options: ResolvedConsumerOptions<M>,
  delivery: Delivery<M>,
): NodeJS.Timeout | undefined {
  const { touch, touchIntervalMs } = delivery;
  if (touch === undefined || touchIntervalMs === undefined) return undefined;
  const timer = setInterval(async () => {
    try {
      await touch();
    } catch (error) {
      emitHook(options.hooks, 'onBrokerError', {
        ...baseEvent(options, delivery, undefined),
        operation: 'touch',
        error,
      });
    }
  }, touchIntervalMs);
  timer.unref();
  return timer;
}

function baseEvent<M>(
  options: ResolvedConsumerOptions<M>,
  delivery: Delivery<M>,
  key: string | undefined,
): ConsumerEvent<M> {
  return {
    consumer: options.name,
    message: delivery.message,
    key,
    deliveryCount: delivery.deliveryCount,
  };
}

/**
 * Process one delivery: extract and scope its key, run the handler at most once per key through the
 * engine, decide, then ack, redeliver later or dead-letter. Never rejects: a failed broker operation is
 * reported to `hooks.onBrokerError` and left to the broker's own redelivery.
 * @returns The decision that was carried out.
 */
export async function processDelivery<M>(
  options: ResolvedConsumerOptions<M>,
  handler: ConsumerHandler<M>,
  delivery: Delivery<M>,
): Promise<Decision> {
  const extracted = extractKey(options, delivery.message);
  const key = 'key' in extracted ? extracted.key : undefined;
  const result: AttemptResult =
    'key' in extracted
      ? await attempt(options, handler, delivery, extracted.key)
      : { kind: 'invalid_key', error: extracted.error };
  const decision = decide(result, delivery.deliveryCount, options.policy);
  const event = baseEvent(options, delivery, key);
  const fail = (operation: string, error: unknown) =>
    emitHook(options.hooks, 'onBrokerError', { ...event, operation, error });

  switch (decision.action) {
    case 'ack':
      try {
        await delivery.ack();
      } catch (error) {
        // The completion is durable, so the broker's redelivery will be acked as a duplicate.
        fail('ack', error);
        return decision;
      }
      emitHook(options.hooks, decision.reason === 'executed' ? 'onExecuted' : 'onDuplicate', event);
      return decision;
    case 'retry':
      emitHook(options.hooks, 'onRetry', {
        ...event,
        reason: decision.reason,
        delayMs: decision.delayMs,
        ...(decision.error === undefined ? {} : { error: decision.error }),
      });
      try {
        await delivery.retry(decision.delayMs);
      } catch (error) {
        fail('retry', error);
      }
      return decision;
    case 'dead_letter':
      try {
        await delivery.deadLetter({
          consumer: options.name,
          key,
          reason: decision.reason,
          error: decision.error,
          deliveryCount: delivery.deliveryCount,
          failedAt: new Date().toISOString(),
        });
      } catch (error) {
        // The dead letter could not be written: keep the message and try again later rather than lose it.
        fail('dead_letter', error);
        try {
          await delivery.retry(options.policy.maxRetryDelayMs);
        } catch (retryError) {
          fail('retry', retryError);
        }
        return decision;
      }
      emitHook(options.hooks, 'onDeadLetter', {
        ...event,
        reason: decision.reason,
        error: decision.error,
      });
      return decision;
  }
}
