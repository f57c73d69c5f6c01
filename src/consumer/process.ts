/**
 * Runs one delivery through the engine and carries out the decision: the one place where consumer policy
 * meets broker operations. Adapters describe a delivery (how to ack, redeliver later, dead-letter and keep
 * the broker's timer alive) and call {@link processDelivery}.
 * @module
 */

import { AbandonedClaimError } from '../core/abandoned-claim.js';
import { describeError } from '../core/describe-error.js';
import { MAX_TIMER_MS } from '../core/duration.js';
import type { RunContext, RunOutcome, RunRequest } from '../core/engine.js';
import {
  isInvalidKeyError,
  isLeaseLostError,
  isReplayedError,
  isStoreUnavailableError,
  StoreUnavailableError,
} from '../core/errors.js';
import { ExecutionContext } from '../core/run-context.js';
import { isThenable } from '../core/thenable.js';
import { callHandler, handlerContext } from './async-context.js';
import {
  type AttemptResult,
  DeadLetterReason,
  type Decision,
  type DecisionPolicy,
  decide,
  RetryReason,
} from './decision.js';
import { recordedDeadLetter } from './given-up.js';
import { handedBackBefore } from './handed-back.js';
import { KeepAlive } from './keep-alive.js';
import { type ConsumerHandler, type ResolvedConsumerOptions, UNKNOWN_LEASE_MS } from './options.js';
import {
  baseEvent,
  brokerError,
  type Delivery,
  emitHook,
  settle,
  writeDeadLetter,
} from './settle.js';
import { storeNameOf, storeTimeoutError, TIMED_OUT, withinStoreTimeout } from './store-deadline.js';

export type { DeadLetter, Delivery } from './settle.js';
export { NOT_WRITTEN } from './settle.js';

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

// Where an attempt stands, for its store deadline (`storeTimeout`, see store-deadline.ts).
/** Waiting for the claim: bounded by `storeTimeout`. */
const CLAIMING = 0;
/** The handler runs: unbounded here (the engine's `maxExecution` bounds it). */
const HANDLING = 1;
/** The handler settled; waiting for the completion (the lease plus `storeTimeout`) or release. */
const SETTLING = 2;
/** Given up on: the delivery was handed back, and a claim answered now must not run. */
const GIVEN_UP = 3;

/** What a deadline resolves an attempt with, told apart from `engine.run`'s outcome by its class. */
class GaveUp {
  constructor(readonly result: AttemptResult) {}
}

/**
 * Thrown out of the engine's function by a claim answered after the attempt gave up on it: the engine then
 * releases the claim instead of running the handler for a delivery already handed back to the broker,
 * whose redelivery may be running it elsewhere, and reports it to its `onStoreError` (operation `claim`),
 * not to `onFailed`: no handler ran (abandoned-claim.ts). Made when a late claim answers, which is rare: it
 * names its store.
 */
function lateClaim(engine: ResolvedConsumerOptions<unknown>['engine'], ms: number) {
  return new AbandonedClaimError(
    `Store '${storeNameOf(engine)}' answered the claim of this delivery after the consumer gave up ` +
      `waiting for it (storeTimeout, ${ms} ms): released, never run; the message was handed back for ` +
      'redelivery',
  );
}

/** A deadline's timer callback: a function of the module, so that arming one allocates no closure. */
function attemptDeadline(attempt: { deadlinePassed(): void }): void {
  attempt.deadlinePassed();
}

/**
 * One delivery run through the engine: what `engine.run` calls, and whether the error that came out of it
 * was the handler's own. A handler may well throw a `StoreUnavailableError` of its own, which must count
 * as a handler failure, not as this consumer's store being down, so its error is told apart by identity
 * (and a step's own store failure, rethrown, by identity too: see `handlerResult`).
 */
class Attempt<M> {
  handlerFailed = false;
  handlerError: unknown;
  /** The engine's context of the run, once the handler started. */
  private run: RunContext | undefined;
  /**
   * Keeps the broker's timer alive from the handler's start until `engine.run` settled, completion
   * included: a completion retried through a store outage (for up to the lease) must not let the broker
   * redeliver the message meanwhile, each copy counting a delivery (toward `maxDeliveries`, or the
   * server's `max_deliver`) and waiting behind the lease for nothing. With `Delivery.touchUntilSettled`,
   * until the decision has been carried out (see {@link settleKeepAlive}).
   */
  private keepAlive: KeepAlive | undefined;
  /** `engine.run` settled with {@link keepAlive} left running for the settle (`touchUntilSettled`). */
  private ran = false;
  /** Past this (`performance.now()`), set once the handler settled, the broker's timer is left to run. */
  private keepAliveUntil = Number.POSITIVE_INFINITY;
  /** How long the broker's timer is kept alive once the handler settled (see {@link settledKeepAliveMs}). */
  private keepAliveMs = UNKNOWN_LEASE_MS;
  /** Where the attempt stands, for its deadline. */
  private phase = CLAIMING;
  /** The running deadline of the phase, if it has one. */
  private deadline: NodeJS.Timeout | undefined;
  /** Resolves {@link outcome}'s wait for `engine.run` once a deadline passed. */
  private giveUp: ((gaveUp: GaveUp) => void) | undefined;

  constructor(
    private readonly options: ResolvedConsumerOptions<M>,
    private readonly handler: ConsumerHandler<M>,
    private readonly delivery: Delivery<M>,
    /** The delivery's idempotency key, as the hooks report it. */
    readonly key: string,
  ) {}

  /** Classify what happened. Never rejects. */
  async outcome(): Promise<AttemptResult> {
    const { options, delivery } = this;
    try {
      // The consumer's own rules hold whatever the engine's settings. `storeErrors: false`: a handler error
      // releases the claim, so the message is retried and then dead-lettered (a stored error would make
      // every redelivery a replay of it). `failOpen: false`: an engine shared with an HTTP route that
      // fails open would otherwise run every copy of a message unprotected during a store outage, and ack
      // it; a consumer can always redeliver later instead.
      const request: RunRequest = {
        key: this.key,
        scope: options.scope,
        storeErrors: false,
        failOpen: false,
      };
      const fingerprint = options.fingerprint?.(delivery.message);
      if (fingerprint !== undefined) request.fingerprint = fingerprint;
      if (options.leaseMs !== undefined) request.leaseMs = options.leaseMs;
      if (options.retentionMs !== undefined) request.retentionMs = options.retentionMs;
      let outcome: RunOutcome<undefined> | GaveUp;
      try {
        outcome = await this.bounded(
          options.engine.run(request, (context) => this.execute(context)),
        );
      } finally {
        // Settled, completion included (or given up on): the decision is carried out next, the broker's
        // timer left alone, unless the adapter has it kept alive until that is done (processDelivery).
        if (delivery.touchUntilSettled === true) this.ran = true;
        else this.keepAlive?.stop();
        clearTimeout(this.deadline);
      }
      if (outcome instanceof GaveUp) return outcome.result;
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
      if (this.handlerFailed && this.handlerError === error) return this.handlerResult();
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
    // A claim that answered after this attempt gave up on it: the delivery is back with the broker, and
    // its redelivery may run elsewhere. Thrown, so the engine releases the claim; never run.
    if (this.phase === GIVEN_UP) {
      throw lateClaim(this.options.engine, this.options.storeTimeoutMs);
    }
    this.phase = HANDLING;
    this.run = context;
    clearTimeout(this.deadline);
    const { delivery } = this;
    // Stopped once `engine.run` settled (see `outcome`), not when the handler did.
    this.keepAlive = startTouching(this.options, delivery, this.key, () => {
      if (!this.keepAliveExpired(context)) return false;
      // From now on the broker is to redeliver the message, as after a crash: told to the adapter, whose
      // own redelivery (a Redis Streams claim round of this process) leaves alone a delivery kept alive.
      delivery.touchesEnded?.();
      return true;
    });
    this.keepAliveMs = settledKeepAliveMs(this.options, context);
    let result: unknown;
    try {
      result = callHandler(
        this.handler,
        delivery.message,
        handlerContext(this.options, this.key, delivery.deliveryCount, context),
      );
    } catch (error) {
      throw this.failed(error);
    }
    if (!isThenable(result)) {
      this.handlerSettled();
      return undefined;
    }
    return Promise.resolve(result).then(
      () => {
        this.handlerSettled();
        return undefined;
      },
      (error: unknown) => {
        throw this.failed(error);
      },
    );
  }

  /**
   * Wait for `running` (`engine.run`), or for the phase's deadline to pass, whichever comes first. The
   * first deadline bounds the claim: `storeTimeout` from now until the handler starts.
   */
  private bounded(
    running: Promise<RunOutcome<undefined>>,
  ): Promise<RunOutcome<undefined> | GaveUp> {
    return new Promise((resolve, reject) => {
      this.giveUp = resolve;
      running.then(resolve, reject);
      this.arm(this.options.storeTimeoutMs);
    });
  }

  private arm(ms: number): void {
    this.deadline = setTimeout(attemptDeadline, ms, this);
    // A store call nobody answers must not keep the process alive by itself.
    this.deadline.unref();
  }

  /**
   * The phase's deadline passed (called by its timer): give the attempt up, unless the handler is running
   * (then the deadline was cleared; a timer already due may still call). From now on a late claim is
   * released, not run (see {@link execute}); whatever else the engine does later, the redelivery meets it
   * in the store.
   */
  deadlinePassed(): void {
    const { phase } = this;
    if (phase === HANDLING || phase === GIVEN_UP) return;
    this.phase = GIVEN_UP;
    this.giveUp?.(new GaveUp(this.givenUpResult(phase)));
  }

  private givenUpResult(phase: number): AttemptResult {
    const { options } = this;
    if (phase === CLAIMING) {
      // Nothing ran: the redelivery meets no claim, or a late one, released when it answers (or, if
      // the release is lost too, one that expires after its lease, unextended: nothing heartbeats it).
      const error = storeTimeoutError(
        options.engine,
        'the claim',
        options.storeTimeoutMs,
        'the message is redelivered later (storeTimeout)',
      );
      return { kind: 'store_unavailable', error, retryAfterMs: error.retryAfterMs };
    }
    if (this.handlerFailed) {
      // The handler failed and its claim's release hangs: the release is best effort anyway (a failed one
      // leaves the claim to expire), so the handler's error decides, as it would have. The redelivery
      // meets the claim in progress, no longer extended, until its lease ends, then takes it over.
      brokerError(
        options,
        baseEvent(options, this.delivery, this.key),
        'release',
        storeTimeoutError(
          options.engine,
          "the release of the failed handler's claim",
          options.storeTimeoutMs,
          'the claim is left to expire after its lease (storeTimeout)',
        ),
      );
      return this.handlerResult();
    }
    // The handler ran and its completion is not confirmed: never acked. The redelivery meets the
    // completion if it was written after all (a duplicate, acked), else the claim, in progress until its
    // lease ends (nothing extends it any more) and then taken over: the handler runs again, as after a
    // crash. By now the lease is over unless the handler extended it further.
    const ms = this.completionTimeoutMs();
    const error = new StoreUnavailableError(
      `Store '${storeNameOf(options.engine)}' has not confirmed the completion of this delivery ` +
        `${ms} ms (its lease plus storeTimeout) after the handler settled: the message is redelivered, ` +
        'never acked without a durable completion',
    );
    return { kind: 'store_unavailable', error, retryAfterMs: error.retryAfterMs };
  }

  /**
   * What the handler's own failure counts as: a handler error, unless it is the `StoreUnavailableError` a
   * step threw because the store failed under it (by identity, see ExecutionContext.threwForStepStore),
   * rethrown. That is the store's outage, not the message's fault: redelivered later as when the claim
   * itself fails, never dead-lettered for it. Counted as a handler error, it used up `maxDeliveries`
   * through an outage and dead-lettered a message that would have run once the store was back. The
   * engine leaves that claim to its lease (its recorded steps kept), so the redelivery waits behind it
   * as `in_progress`, then takes it over and replays the recorded steps. A `StoreUnavailableError` of the
   * handler's own making (its own database) is still a handler error.
   */
  private handlerResult(): AttemptResult {
    const error = this.handlerError;
    if (
      this.run !== undefined &&
      isStoreUnavailableError(error) &&
      ExecutionContext.threwForStepStore(this.run, error)
    ) {
      return { kind: 'store_unavailable', error, retryAfterMs: error.retryAfterMs };
    }
    return { kind: 'handler_error', error };
  }

  /** How long after the handler succeeded its completion is waited for: the lease plus `storeTimeout`. */
  private completionTimeoutMs(): number {
    return Math.min(this.keepAliveMs + this.options.storeTimeoutMs, MAX_TIMER_MS);
  }

  /**
   * Whether the broker's timer is no longer to be kept alive: the lease was lost (taken over, or past
   * `maxExecution`), or the handler settled longer than a lease ago. By then the engine has given the
   * completion up, or a store call of its hangs (a store without timeouts): either way the message must be
   * redelivered, as after a crash, not held for as long as the process lives. The latter is reported to
   * `onBrokerError` (operation `touch`): the engine retries a failing store itself and reports it, but a
   * store call that never answers reaches no hook.
   */
  keepAliveExpired(run: RunContext): boolean {
    // The run is over: the settle bounds its own calls (storeTimeout, brokerTimeout), and its end stops it.
    if (this.ran) return false;
    if (run.signal.aborted) return true;
    if (performance.now() <= this.keepAliveUntil) return false;
    // Read with care: this runs in a timer, where a throw would end the process, and an engine of the
    // user's own making may lack `store`.
    const storeName = storeNameOf(this.options.engine);
    emitHook(this.options.hooks, 'onBrokerError', {
      ...baseEvent(this.options, this.delivery, this.key),
      operation: 'touch',
      error: new StoreUnavailableError(
        `Store '${storeName}' has not settled this delivery's execution ` +
          `${this.keepAliveMs} ms (its lease) after the handler did: its broker timer is no longer kept ` +
          'alive, and the broker will redeliver the message (a store outage past the lease, or a store ' +
          'call without a timeout of its own)',
      ),
    });
    return true;
  }

  /**
   * The keep-alive still going once `engine.run` settled, for the settle to stop (`touchUntilSettled`):
   * a settle slower than the broker's timer (a dead letter's record in a slow store) let the broker hand
   * the message to another consumer, whose delivery found no letter recorded yet and ran the handler again.
   */
  get settleKeepAlive(): KeepAlive | undefined {
    return this.ran ? this.keepAlive : undefined;
  }

  /** The handler succeeded: the completion is waited for the lease plus `storeTimeout`. */
  private handlerSettled(): void {
    if (this.keepAlive !== undefined) {
      this.keepAliveUntil = performance.now() + this.keepAliveMs;
    }
    this.phase = SETTLING;
    this.arm(this.completionTimeoutMs());
  }

  // Remember the handler's own error, to tell it apart from the engine's by identity. The claim's release
  // is waited for `storeTimeout`.
  private failed(error: unknown): unknown {
    this.handlerFailed = true;
    this.handlerError = error;
    if (this.keepAlive !== undefined) {
      this.keepAliveUntil = performance.now() + this.keepAliveMs;
    }
    this.phase = SETTLING;
    this.arm(this.options.storeTimeoutMs);
    return error;
  }
}

// The results without data, shared rather than allocated per message.
const EXECUTED: AttemptResult = Object.freeze({ kind: 'executed' });
const REPLAYED: AttemptResult = Object.freeze({ kind: 'replayed' });
const MISMATCH: AttemptResult = Object.freeze({ kind: 'mismatch' });

/**
 * How long after its handler settled a delivery is kept alive at most: the execution's own lease, for as
 * long as the engine retries a failed completion (read from the run: an engine instance's options are not
 * seen here), else the lease the consumer's options give, else {@link UNKNOWN_LEASE_MS}.
 */
function settledKeepAliveMs<M>(options: ResolvedConsumerOptions<M>, run: RunContext): number {
  return ExecutionContext.leaseMsOf(run) ?? options.settleKeepAliveMs ?? UNKNOWN_LEASE_MS;
}

/**
 * Keep the broker's own timer of the delivery alive while its handler runs and its completion is written,
 * until the lease is lost (taken over, or no longer extended past `maxExecution`) or, once the handler
 * settled, a lease has passed: from then on the broker may redeliver the message, and the redelivery is
 * settled against whoever holds the key, instead of a hung handler keeping it forever.
 * Also, without `expired`, while a redelivery writes a dead letter decided on before (processDelivery).
 * One touch at a time (see keep-alive.ts): a hung connection must not pile touches up behind a long handler.
 * @param expired - Ends the keep-alive when true; read at each touch (see `Attempt.keepAliveExpired`), not
 *   before: the engine creates a run's signal only when asked for.
 */
function startTouching<M>(
  options: ResolvedConsumerOptions<M>,
  delivery: Delivery<M>,
  key: string | undefined,
  expired?: () => boolean,
): KeepAlive | undefined {
  const { touch, touchIntervalMs } = delivery;
  if (touch === undefined || touchIntervalMs === undefined) return undefined;
  return new KeepAlive(
    touch,
    touchIntervalMs,
    (error) =>
      emitHook(options.hooks, 'onBrokerError', {
        ...baseEvent(options, delivery, key),
        operation: 'touch',
        error,
      }),
    expired,
    // Taking over from the adapter's keep-alive (claim-phase.ts): an interval after its last touch.
    delivery.touchedAt?.(),
  );
}

/**
 * The decision for a delivery whose processing itself threw (a bug, or a policy function such as
 * `isPermanentError` or `backoff` that threw): settled as a handler error, so it is never left unsettled.
 */
function failedDecision(error: unknown, deliveryCount: number, policy: DecisionPolicy): Decision {
  try {
    return decide({ kind: 'handler_error', error }, deliveryCount, policy);
  } catch {
    // The policy's functions threw again: no retries left, or the longest redelivery delay.
    return deliveryCount >= policy.maxDeliveries
      ? {
          action: 'dead_letter',
          reason: DeadLetterReason.HandlerError,
          error: describeError(error),
        }
      : {
          action: 'retry',
          reason: RetryReason.HandlerError,
          delayMs: policy.maxRetryDelayMs,
          error,
        };
  }
}

/**
 * The decision for a handler error that would dead-letter `delivery`, with the deliveries recorded as
 * handed back without running (handed-back.ts) not counted against `maxDeliveries`: a retry if that
 * leaves deliveries. Only on this rare path, and only for adapters that hand messages back.
 */
async function notCountingHandedBack<M>(
  options: ResolvedConsumerOptions<M>,
  delivery: Delivery<M>,
  result: AttemptResult,
  decision: Decision,
): Promise<Decision> {
  const { brokerId, deliveryCount } = delivery;
  if (delivery.mayHandBack !== true || brokerId === undefined || deliveryCount <= 1) {
    return decision;
  }
  // A read that does not answer in time credits none, as one that fails: the stricter count.
  const answer = await withinStoreTimeout(
    handedBackBefore(options, brokerId, deliveryCount),
    options.storeTimeoutMs,
  );
  const handedBack = answer === TIMED_OUT ? 0 : answer;
  return handedBack === 0 ? decision : decide(result, deliveryCount - handedBack, options.policy);
}

/** Hand `delivery` back, its dead-letter record not read in time (`storeTimeout`). */
function handBackUnread<M>(
  options: ResolvedConsumerOptions<M>,
  delivery: Delivery<M>,
): Promise<Decision> {
  const error = storeTimeoutError(
    options.engine,
    'the read of its dead-letter record',
    options.storeTimeoutMs,
    'the message is redelivered later (storeTimeout)',
  );
  const decision = decide(
    { kind: 'store_unavailable', error, retryAfterMs: error.retryAfterMs },
    delivery.deliveryCount,
    options.policy,
  );
  // Before the key is extracted: reported without one, as any delivery settled before its key.
  return settle(options, delivery, undefined, decision);
}

/**
 * Process one delivery: extract and scope its key, run the handler at most once per key through the
 * engine, decide, then ack, redeliver later or dead-letter. A delivery carrying a dead letter that could
 * not be written before (`pendingDeadLetter`), or a redelivery with one recorded under its `brokerId`, is
 * dead-lettered again without running the handler.
 *
 * Never rejects, and never leaves the delivery unsettled: a failed broker operation is reported to
 * `hooks.onBrokerError` and the message kept; if deciding itself throws, that is reported to
 * `hooks.onBrokerError` (operation `process`) and the delivery is settled as a handler error.
 * @returns The decision that was carried out.
 */
export async function processDelivery<M>(
  options: ResolvedConsumerOptions<M>,
  handler: ConsumerHandler<M>,
  delivery: Delivery<M>,
): Promise<Decision> {
  let pending = delivery.pendingDeadLetter;
  // Checked here, not only inside: a first delivery (nearly all of them) then costs no store read, nor await.
  if (
    pending === undefined &&
    delivery.brokerId !== undefined &&
    delivery.deliveryCount > 1 &&
    delivery.firstDelivery !== true
  ) {
    const recorded = await withinStoreTimeout(
      recordedDeadLetter(options, delivery),
      options.storeTimeoutMs,
    );
    // Unlike a failed read, which leaves the delivery to the claim (failing closed with the store), a read
    // that hangs says nothing of the claim, which may well succeed and run the handler of a message given
    // up on: handed back instead, as a store-unavailable redelivery.
    if (recorded === TIMED_OUT) return handBackUnread(options, delivery);
    pending = recorded;
  }
  if (pending !== undefined) {
    // A letter carried on the copy (RabbitMQ) has no brokerId, so no record to skip.
    const recorded = delivery.pendingDeadLetter === undefined;
    // Kept alive through the write, as the delivery that decided on the letter was (touchUntilSettled):
    // a write slower than the broker's timer let the broker redeliver the message meanwhile, and each
    // redelivery wrote the letter once more (NATS, its PubAck 2.5 s late and `ack_wait` 1 s: three).
    const keepAlive =
      delivery.touchUntilSettled === true
        ? startTouching(options, delivery, pending.key)
        : undefined;
    try {
      // Stopped before a retry, should the write fail again (settle.ts).
      await writeDeadLetter(
        options,
        delivery,
        baseEvent(options, delivery, pending.key),
        pending,
        recorded,
        keepAlive,
      );
    } finally {
      keepAlive?.stop();
    }
    return { action: 'dead_letter', reason: pending.reason, error: pending.error };
  }
  let key: string | undefined;
  let decision: Decision;
  let attempt: Attempt<M> | undefined;
  try {
    const extracted = extractKey(options, delivery.message);
    key = typeof extracted === 'string' ? extracted : undefined;
    let result: AttemptResult;
    if (typeof extracted === 'string') {
      attempt = new Attempt(options, handler, delivery, extracted);
      result = await attempt.outcome();
    } else {
      result = { kind: 'invalid_key', error: extracted.error };
    }
    decision = decide(result, delivery.deliveryCount, options.policy, delivery.heldRetries);
    if (decision.action === 'dead_letter' && result.kind === 'handler_error') {
      decision = await notCountingHandedBack(options, delivery, result, decision);
    }
  } catch (error) {
    brokerError(options, baseEvent(options, delivery, key), 'process', error);
    decision = failedDecision(error, delivery.deliveryCount, options.policy);
  }
  const keepAlive = attempt?.settleKeepAlive;
  if (keepAlive === undefined) return settle(options, delivery, key, decision);
  return settleKeptAlive(options, delivery, key, decision, keepAlive);
}

/**
 * Carry `decision` out on `delivery` with its broker timer kept alive by `keepAlive` until that is done
 * (`Delivery.touchUntilSettled`), then stop it. The settle stops it before any retry (a retry decided, or
 * a dead letter whose write failed), which sets the timer itself (the redelivery's delay: a touch after it
 * would undo it). Never rejects.
 */
async function settleKeptAlive<M>(
  options: ResolvedConsumerOptions<M>,
  delivery: Delivery<M>,
  key: string | undefined,
  decision: Decision,
  keepAlive: KeepAlive,
): Promise<Decision> {
  try {
    return await settle(options, delivery, key, decision, keepAlive);
  } finally {
    keepAlive.stop();
  }
}
