/**
 * Carrying a decision out on a delivery: ack, redeliver later or dead-letter, and the hooks that report
 * each. Never throws: a failed broker operation is reported to `hooks.onBrokerError` and the message is
 * kept, never dropped.
 * @module
 */
import { describeError } from '../core/describe-error.js';
import type { StoredErrorInfo } from '../core/errors.js';
import { callHook } from '../core/hooks.js';
import { isThenable } from '../core/thenable.js';
import { brokerTimeoutError, withinBrokerTimeout } from './broker-deadline.js';
import { DeadLetterReason, type Decision, RetryReason } from './decision.js';
import { recordDeadLetter } from './given-up.js';
import type { KeepAlive } from './keep-alive.js';
import type { ConsumerEvent, ConsumerHooks, ResolvedConsumerOptions } from './options.js';
import { storeTimeoutError, TIMED_OUT, withinStoreTimeout } from './store-deadline.js';

/** What is recorded with a dead-lettered message. */
export interface DeadLetter {
  /** The consumer's name. */
  consumer: string;
  /** The message's idempotency key, when it had one. */
  key: string | undefined;
  /** Why it was dead-lettered. */
  reason: DeadLetterReason;
  /** The last error, bounded in size (see `describeError`). */
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
  /**
   * A dead letter that an earlier delivery decided on but could not write, carried on this copy (see
   * `retry`). The runner then writes it again and does not run the handler.
   */
  pendingDeadLetter?: DeadLetter | undefined;
  /**
   * The broker's identity of this message, the same on every redelivery and never reused for another
   * (NATS: stream, sequence and timestamp; Redis Streams: the entry id; RabbitMQ: the id the consumer
   * stamped on its own retry copy, none for the application's original). Each dead letter is then
   * recorded in the store under it before it is written, and a redelivery finding it (a failed write, or a
   * lost settle after the write) writes it again instead of running the handler.
   */
  brokerId?: string | undefined;
  /**
   * The broker says this delivery is the message's first (RabbitMQ's `redelivered` flag unset): nothing
   * can be recorded under its `brokerId` yet, so the store is not read for it. Needed where `deliveryCount`
   * alone cannot tell (a RabbitMQ retry copy counts the deliveries of the message before it).
   */
  firstDelivery?: boolean | undefined;
  /**
   * Whether this adapter may hand a delivery back without running it, recording it under `brokerId`
   * (handed-back.ts: NATS, for a message that waited behind stuck slots). A handler error that would
   * dead-letter such a message then does not count the deliveries recorded as handed back.
   */
  mayHandBack?: boolean | undefined;
  /**
   * Retries of this delivery the adapter waited out in place, not redelivered (NATS, on the last delivery
   * a finite `max_deliver` allows): an in-progress retry's delay grows with them as it does with
   * redeliveries. Before, such a retry behind a long holder came round at its first short delay for as
   * long as the holder ran (`max_deliver` 1 behind a 10 s run: 98 claims). @default 0
   */
  heldRetries?: number | undefined;
  /**
   * Wait for the dead letter's write however long it takes, rather than give it up after
   * `brokerTimeout`: for a delivery the broker will not make again (NATS, on the last delivery a finite
   * `max_deliver` allows), where a write given up on that then failed lost the message with no letter and
   * no report (its redelivery, which would write it, never came). With `touchUntilSettled`, kept alive
   * meanwhile; a failure is handled as any failed write (reported, recorded, retried).
   */
  awaitsDeadLetter?: boolean | undefined;
  /** Acknowledge: the message is done. */
  ack(): Promise<void> | void;
  /**
   * Have the broker deliver the message again after `delayMs`, without acking it for good. With
   * `deadLetter`, the dead-letter destination failed: an adapter that can carry the letter on the copy
   * reports it back as `pendingDeadLetter`, so the handler is not run again for a message it gave up on.
   */
  retry(delayMs: number, deadLetter?: DeadLetter): Promise<void> | void;
  /**
   * Whether `retry` can redeliver the message later unchanged, with its delivery count carried. False
   * (RabbitMQ: the retry copy's header table would not fit amqplib's 64 KB) turns a handler error's retry
   * into a dead letter (`headers_too_large`): a handler that failed once may fail again, and a message
   * that cannot count its deliveries must not come back without end. Other retries (in progress, store
   * unavailable, lease lost: nothing final happened) still call `retry`, which must then hand the message
   * back another way, never hold it unacked for good. Absent: always true.
   */
  canRetry?(): boolean;
  /**
   * Move the message to the dead-letter destination with `letter` recorded, then settle it. Resolves to
   * {@link NOT_WRITTEN} when the broker wrote nothing because the message was settled before (Redis
   * Streams: the entry no longer pending, its letter written or the entry acked by another delivery):
   * the delivery is then reported as a duplicate, not as a letter written. Anything else is a letter
   * written.
   */
  deadLetter(letter: DeadLetter): Promise<typeof NOT_WRITTEN | undefined> | Promise<void> | void;
  /** Reset the broker's own redelivery timer while the handler runs (JetStream `working()`). */
  touch?(): Promise<void> | void;
  /** How often to call `touch`. */
  touchIntervalMs?: number;
  /**
   * When the adapter's own keep-alive of this delivery last touched it (`performance.now()`, see
   * consumer/claim-phase.ts), read as the handler starts: the runner's first touch comes an interval
   * after it, not after the handler's start (up to two intervals between touches, past a broker timer
   * under twice the interval). Absent: an interval after the handler starts.
   */
  touchedAt?(): number;
  /**
   * Told once the runner stops calling `touch` for good while the delivery is still under way: the lease
   * was lost (taken over, or past `maxExecution`), or the handler settled a lease ago and its completion
   * is still unconfirmed. From then on the broker is meant to redeliver the message, as after a crash:
   * Redis Streams, whose claim rounds leave the entries this process is handling alone until then.
   */
  touchesEnded?(): void;
  /**
   * Go on calling `touch` after the handler's execution settled, until the decision has been carried out
   * (the ack, or the dead letter with its record in the store), instead of stopping as the execution
   * settles; stopped before a retry, which sets the broker's timer itself. Also called while a redelivery
   * writes a dead letter decided on before (`pendingDeadLetter`, or one recorded under `brokerId`), which
   * runs no handler. For an adapter whose broker hands a message whose timer ran out to another consumer
   * while this one still settles it (a Redis Streams claim round, JetStream after `ack_wait`): that
   * delivery found no letter recorded yet and ran the handler again (or, finding one, wrote it once
   * more). Its `touch` must do nothing once the message is settled. The runner stops the touches itself
   * before it calls `retry` (a dead letter whose write failed included): `touch` needs no guard for that.
   */
  touchUntilSettled?: boolean;
}

/**
 * What `Delivery.deadLetter` resolves to when it wrote nothing, the message having been settled before by
 * another delivery. A value of its own: an adapter that resolves to nothing (RabbitMQ, NATS) has written
 * its letter, as before.
 */
export const NOT_WRITTEN: unique symbol = Symbol('not written');

/** Call hook `name`; a hook that throws is ignored. */
export function emitHook<M, K extends keyof ConsumerHooks<M>>(
  hooks: ConsumerHooks<M>,
  name: K,
  event: Parameters<NonNullable<ConsumerHooks<M>[K]>>[0],
): void {
  const hook = hooks[name] as ((e: typeof event) => unknown) | undefined;
  // Observability must never change a decision: a throw or an async hook's rejection is swallowed.
  if (hook !== undefined) callHook(hook, event);
}

/** The fields every hook event of `delivery` has. */
export function baseEvent<M>(
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

/** Report a failed operation to `hooks.onBrokerError`. */
export function brokerError<M>(
  options: ResolvedConsumerOptions<M>,
  event: ConsumerEvent<M>,
  operation: string,
  error: unknown,
): void {
  emitHook(options.hooks, 'onBrokerError', { ...event, operation, error });
}

/**
 * `decision`, unless it retries a handler error that `delivery` cannot retry (`Delivery.canRetry`): then
 * a dead letter, `headers_too_large`, with the handler's error. Asked only on that path, which is the
 * one where the message's count matters: an in-progress or store-unavailable retry is the adapter's to
 * hand back otherwise.
 */
function retryable<M>(delivery: Delivery<M>, decision: Decision): Decision {
  if (
    decision.action !== 'retry' ||
    decision.reason !== RetryReason.HandlerError ||
    delivery.canRetry?.() !== false
  ) {
    return decision;
  }
  return {
    action: 'dead_letter',
    reason: DeadLetterReason.HeadersTooLarge,
    error: describeError(decision.error),
  };
}

/**
 * Carry `decided` out on `delivery`. Never rejects. A handler error's retry that the delivery cannot
 * make (`Delivery.canRetry`) is dead-lettered instead (`headers_too_large`, the handler's error recorded).
 * @param keepAlive - The delivery's keep-alive, still touching through the settle
 *   (`Delivery.touchUntilSettled`): stopped before `retry` is called (see {@link retryWithin}). The caller
 *   stops it once the settle ended.
 * @returns The decision carried out.
 */
export async function settle<M>(
  options: ResolvedConsumerOptions<M>,
  delivery: Delivery<M>,
  key: string | undefined,
  decided: Decision,
  keepAlive?: KeepAlive,
): Promise<Decision> {
  const event = baseEvent(options, delivery, key);
  const decision = retryable(delivery, decided);
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
      await retryWithin(options, delivery, event, decision.delayMs, undefined, keepAlive);
      return decision;
    case 'dead_letter': {
      const letter: DeadLetter = {
        consumer: options.name,
        key,
        reason: decision.reason,
        error: decision.error,
        deliveryCount: delivery.deliveryCount,
        failedAt: new Date().toISOString(),
      };
      // Recorded before it is written, not only when writing fails: a write the broker took whose settle
      // was lost (a JetStream `term()` is sent without a reply, and dropped with a connection that breaks;
      // a crash between the Redis `XADD` and its `XACK`) brings the message back, and without the record
      // that redelivery ran the handler again, past `maxDeliveries`. A record that cannot be made leaves
      // the write to go on as before.
      const recorded = await recordWithin(options, delivery, event, letter).then(
        (answered) => answered && delivery.brokerId !== undefined,
        () => false,
      );
      await writeDeadLetter(options, delivery, event, letter, recorded, keepAlive);
      return decision;
    }
  }
}

/**
 * Have `delivery` redelivered after `delayMs`, waiting for the broker at most `brokerTimeout`: a failure,
 * or a call that did not answer in time, is reported to `onBrokerError` (operation `retry`). Never rejects,
 * never acks: a retry given up on leaves the message with the broker, unacked (RabbitMQ: its original is
 * acked once the copy's confirm comes, if it does; Redis Streams: the entry stays pending, reclaimed after
 * `minIdle`). One given up on goes on, and the consumer's `close()` waits for it (late-settles.ts).
 *
 * `keepAlive` is stopped first, here rather than in each adapter: the retry sets the broker's timer for
 * the redelivery, and a touch after it undoes that (nats-server takes a `working()` after `nak(delay)` as
 * progress and redelivers `ack_wait` after it instead of after the delay; a Redis Streams idle reset
 * defers the reclaim). A touch already sent still settles; none starts after this.
 */
async function retryWithin<M>(
  options: ResolvedConsumerOptions<M>,
  delivery: Delivery<M>,
  event: ConsumerEvent<M>,
  delayMs: number,
  letter?: DeadLetter,
  keepAlive?: KeepAlive,
): Promise<void> {
  keepAlive?.stop();
  try {
    const call = delivery.retry(delayMs, letter);
    const bounded = withinBrokerTimeout(call, options.brokerTimeoutMs);
    if (bounded !== undefined && (await bounded) === TIMED_OUT) {
      givenUp(options, event, 'retry', 'the retry');
      // Still going (a RabbitMQ copy confirmed late acks its original then): close() waits for it.
      options.lateSettles.add(Promise.resolve(call));
    }
  } catch (error) {
    brokerError(options, event, 'retry', error);
  }
}

/**
 * Record `letter` (given-up.ts), waiting for the store at most `storeTimeout`: resolves to false, reported
 * to `onBrokerError` (operation `dead_letter`), when it did not answer in time. A record that answers late
 * is still made, and is as good as one made in time: its redelivery writes the letter again.
 */
async function recordWithin<M>(
  options: ResolvedConsumerOptions<M>,
  delivery: Delivery<M>,
  event: ConsumerEvent<M>,
  letter: DeadLetter,
): Promise<boolean> {
  const answer = await withinStoreTimeout(
    recordDeadLetter(options, delivery, letter),
    options.storeTimeoutMs,
  );
  if (answer !== TIMED_OUT) return true;
  brokerError(
    options,
    event,
    'dead_letter',
    storeTimeoutError(
      options.engine,
      'the record of its dead letter',
      options.storeTimeoutMs,
      'the letter is written unrecorded (storeTimeout)',
    ),
  );
  return false;
}

/**
 * Write `letter` to the dead-letter destination, or keep the message with the letter carried.
 * @param recorded - The letter is in the store already (given-up.ts): a failed write need not record it.
 * @param keepAlive - As for {@link settle}: stopped before a failed write's retry.
 */
export async function writeDeadLetter<M>(
  options: ResolvedConsumerOptions<M>,
  delivery: Delivery<M>,
  event: ConsumerEvent<M>,
  letter: DeadLetter,
  recorded = false,
  keepAlive?: KeepAlive,
): Promise<void> {
  let write: Promise<unknown> | undefined;
  let written: unknown;
  try {
    const result = delivery.deadLetter(letter);
    // Kept: a write given up on may land later, and is reported then (reportLateLetter).
    write = isThenable(result) ? Promise.resolve(result) : undefined;
    written = await withinBrokerTimeout(write, options.brokerTimeoutMs);
    if (written === TIMED_OUT && delivery.awaitsDeadLetter && write !== undefined) {
      // A delivery the broker will not make again: the write is waited for however long it takes (given
      // up on and then failed, the message was lost with no letter and no report), but said to be overdue
      // now, as every settle past brokerTimeout is (waited for in silence, a hung write told nothing).
      brokerError(
        options,
        event,
        'dead_letter',
        brokerTimeoutError(
          'the dead letter',
          options.brokerTimeoutMs,
          'it is still waited for, its handler slot kept: the broker will not deliver this message again',
        ),
      );
      written = await write;
    }
  } catch (error) {
    // The dead letter could not be written: keep the message and try again later rather than lose it. The
    // letter goes with the copy (or, where the copy cannot carry it, into the store: given-up.ts), so that
    // the redelivery writes it again instead of running the handler once more: a destination that keeps
    // failing must not re-run the handler without end.
    brokerError(options, event, 'dead_letter', error);
    if (!recorded) {
      try {
        await recordWithin(options, delivery, event, letter);
      } catch (recordError) {
        brokerError(options, event, 'dead_letter', recordError);
      }
    }
    await retryWithin(options, delivery, event, options.policy.maxRetryDelayMs, letter, keepAlive);
    return;
  }
  if (written === TIMED_OUT) {
    // Neither written nor failed: the write goes on and may yet land (then its settle follows: the
    // original acked, the entry acked, the message terminated). So it is not carried on a retry copy nor
    // recorded now, which would be a second way of writing it: the message stays unacked, and its
    // redelivery meets the record made before the write (NATS, Redis Streams, a RabbitMQ retry copy) and
    // writes the letter then, or, without one, runs as any redelivery.
    givenUp(options, event, 'dead_letter', 'the dead letter');
    // close() waits for it, and for its report, within drainTimeout (late-settles.ts).
    if (write !== undefined) {
      options.lateSettles.add(reportLateLetter(options, event, letter, write));
    }
    return;
  }
  if (written === NOT_WRITTEN) {
    // Another delivery of this message settled it first (wrote its letter, or acked it): this one is a
    // duplicate of it, reported as one. Reported as a letter, it counted one letter twice (metrics,
    // alerts), once per consumer that tried to write it.
    emitHook(options.hooks, 'onDuplicate', event);
    return;
  }
  emitHook(options.hooks, 'onDeadLetter', { ...event, reason: letter.reason, error: letter.error });
}

/**
 * Report a settle call given up on past `brokerTimeout` (`onBrokerError`): its slot is freed, and the
 * message, never acked, is the broker's to redeliver.
 */
function givenUp<M>(
  options: ResolvedConsumerOptions<M>,
  event: ConsumerEvent<M>,
  operation: 'retry' | 'dead_letter',
  what: string,
): void {
  const then =
    'its handler slot is freed, the message left unacked with the broker, which redelivers it';
  brokerError(options, event, operation, brokerTimeoutError(what, options.brokerTimeoutMs, then));
}

/**
 * Report a dead letter given up on (`brokerTimeout`) once its write lands after all: `onDeadLetter`
 * then, as the only word that the message was dead-lettered (the message is settled and never comes
 * back, so no redelivery reports it). At most once per letter written: the write answers once, and a
 * write that finds its message settled before ({@link NOT_WRITTEN}: a redelivery wrote the letter first,
 * and reported it) or fails late is not reported again; its delivery was reported to `onBrokerError`.
 * Nor is one landing after the consumer's `close()` resolved: that ends every hook call (hook-calls.ts);
 * `close()` waits for it within `drainTimeout`, so only one that has not landed by then, when `close()`
 * resolves `false`, goes unreported.
 * @returns Settles (never rejects) once the write answered and its report, if any, was made.
 */
function reportLateLetter<M>(
  options: ResolvedConsumerOptions<M>,
  event: ConsumerEvent<M>,
  letter: DeadLetter,
  write: Promise<unknown>,
): Promise<void> {
  return write.then(
    (written) => {
      if (written === NOT_WRITTEN) return;
      emitHook(options.hooks, 'onDeadLetter', {
        ...event,
        reason: letter.reason,
        error: letter.error,
      });
    },
    // A late failure leaves the message with the broker, whose redelivery writes the recorded letter.
    () => {},
  );
}
