/**
 * Runs one delivery through the engine and carries out the decision: the one place where consumer policy
 * meets broker operations. Adapters describe a delivery (how to ack, redeliver later, dead-letter and keep
 * the broker's timer alive) and call {@link processDelivery}.
 * @module
 */
import type { RunContext, RunRequest } from '../core/engine.js';
import {
  isInvalidKeyError,
  isLeaseLostError,
  isReplayedError,
  isStoreUnavailableError,
  type StoredErrorInfo,
} from '../core/errors.js';
import { isThenable } from '../core/thenable.js';
import { type AttemptResult, type DeadLetterReason, type Decision, decide } from './decision.js';
import type {
  ConsumerContext,
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

// Why a message has no usable key; a class so that the common outcome, a key, is a bare string.
class MissingKey {
  constructor(readonly error: unknown) {}
}

function extractKey<M>(options: ResolvedConsumerOptions<M>, message: M): string | MissingKey {
  try {
    const key = options.key(message);
    if (key === undefined || key === '')
      return new MissingKey(new Error('The message has no idempotency key'));
    return key;
  } catch (error) {
    return new MissingKey(error);
  }
}

/**
 * What the handler receives. A class rather than an object literal: `signal` stays a lazy getter (the
 * engine only creates the AbortSignal for handlers that read it), and V8 builds a literal with a getter
 * through its slow path, about 0.5 µs per message against some 20 ns for a class instance.
 */
class HandlerContext implements ConsumerContext {
  readonly token: number;
  readonly attempt: number;
  // Own properties, so that they keep working when destructured (`const { extendLease } = ctx`).
  readonly extendLease: RunContext['extendLease'];
  readonly downstreamKey: (step: string) => string;
  readonly step: RunContext['step'];
  readonly #run: RunContext;

  constructor(
    readonly key: string,
    readonly deliveryCount: number,
    run: RunContext,
  ) {
    this.#run = run;
    this.token = run.token;
    this.attempt = run.attempt;
    this.extendLease = run.extendLease;
    this.downstreamKey = run.downstreamKey;
    this.step = run.step;
  }

  get signal(): AbortSignal {
    return this.#run.signal;
  }
}

/**
 * One delivery run through the engine: what `engine.run` calls, and whether the error that came out of it
 * was the handler's own. A handler may well throw a `StoreUnavailableError` of its own, which must count
 * as a handler failure, not as this consumer's store being down, so its error is told apart by identity.
 */
class Attempt<M> {
  handlerFailed = false;
  handlerError: unknown;

  constructor(
    private readonly options: ResolvedConsumerOptions<M>,
    private readonly handler: ConsumerHandler<M>,
    private readonly delivery: Delivery<M>,
    private readonly key: string,
  ) {}

  /** Classify what happened. Never rejects. */
  async outcome(): Promise<AttemptResult> {
    const { options, delivery } = this;
    try {
      const request: RunRequest = { key: this.key, scope: options.scope };
      const fingerprint = options.fingerprint?.(delivery.message);
      if (fingerprint !== undefined) request.fingerprint = fingerprint;
      if (options.leaseMs !== undefined) request.leaseMs = options.leaseMs;
      if (options.retentionMs !== undefined) request.retentionMs = options.retentionMs;
      const outcome = await options.engine.run(request, (context) => this.execute(context));
      switch (outcome.status) {
        case 'executed':
          return EXECUTED;
        case 'replayed':
          return REPLAYED;
        case 'in_progress':
          return { kind: 'in_progress', retryAfterMs: outcome.retryAfterMs };
        case 'mismatch':
          return MISMATCH;
      }
    } catch (error) {
      if (this.handlerFailed && this.handlerError === error) {
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

  /**
   * What the engine runs. Consumers only need "done": nothing is stored, so records stay a few bytes. Not
   * an async function: a synchronous handler then costs no promise, and an asynchronous one a single
   * `then` rather than a whole async frame.
   */
  private execute(context: RunContext): Promise<undefined> | undefined {
    const { delivery } = this;
    const timer = startTouching(this.options, delivery, context);
    let result: unknown;
    try {
      result = this.handler(
        delivery.message,
        new HandlerContext(this.key, delivery.deliveryCount, context),
      );
    } catch (error) {
      if (timer !== undefined) clearInterval(timer);
      throw this.failed(error);
    }
    if (!isThenable(result)) {
      if (timer !== undefined) clearInterval(timer);
      return undefined;
    }
    return Promise.resolve(result).then(
      () => {
        if (timer !== undefined) clearInterval(timer);
        return undefined;
      },
      (error: unknown) => {
        if (timer !== undefined) clearInterval(timer);
        throw this.failed(error);
      },
    );
  }

  // Remember the handler's own error, to tell it apart from the engine's by identity.
  private failed(error: unknown): unknown {
    this.handlerFailed = true;
    this.handlerError = error;
    return error;
  }
}

// The results without data, shared rather than allocated per message.
const EXECUTED: AttemptResult = Object.freeze({ kind: 'executed' });
const REPLAYED: AttemptResult = Object.freeze({ kind: 'replayed' });
const MISMATCH: AttemptResult = Object.freeze({ kind: 'mismatch' });

/**
 * Keep the broker's own timer of the delivery alive while its handler runs, until the lease is lost (taken
 * over, or no longer extended past `maxExecution`): from then on the broker may redeliver the message, and
 * the redelivery is settled against whoever holds the key, instead of a hung handler keeping it forever.
 */
function startTouching<M>(
  options: ResolvedConsumerOptions<M>,
  delivery: Delivery<M>,
  run: RunContext,
): NodeJS.Timeout | undefined {
  const { touch, touchIntervalMs } = delivery;
  if (touch === undefined || touchIntervalMs === undefined) return undefined;
  const timer = setInterval(async () => {
    // Read here, not before the handler: the engine creates a run's signal only when it is asked for.
    if (run.signal.aborted) {
      clearInterval(timer);
      return;
    }
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

function brokerError<M>(
  options: ResolvedConsumerOptions<M>,
  event: ConsumerEvent<M>,
  operation: string,
  error: unknown,
): void {
  emitHook(options.hooks, 'onBrokerError', { ...event, operation, error });
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
  const key = typeof extracted === 'string' ? extracted : undefined;
  const result: AttemptResult =
    typeof extracted === 'string'
      ? await new Attempt(options, handler, delivery, extracted).outcome()
      : { kind: 'invalid_key', error: extracted.error };
  const decision = decide(result, delivery.deliveryCount, options.policy);
  const event = baseEvent(options, delivery, key);

  switch (decision.action) {
    case 'ack':
      try {
        await delivery.ack();
      } catch (error) {
        // The completion is durable, so the broker's redelivery will be acked as a duplicate.
        brokerError(options, event, 'ack', error);
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
        brokerError(options, event, 'retry', error);
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
        brokerError(options, event, 'dead_letter', error);
        try {
          await delivery.retry(options.policy.maxRetryDelayMs);
        } catch (retryError) {
          brokerError(options, event, 'retry', retryError);
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
