/**
 * The idempotent NATS JetStream consumer: thin over the shared consumer module. Redelivery later is
 * `nak(delay)` (on the last delivery a finite `max_deliver` allows, a hold here instead, last-delivery.ts,
 * as the server drops a message `nak()`ed there), the broker timer is kept alive with `working()` from
 * the delivery's start (consumer/claim-phase.ts) until its ack or dead letter is done, and a dead letter
 * is a publish to a DLQ subject followed by `term()`.
 * @module
 */

import { stoppingAtHandler, touchWhileClaiming } from '../consumer/claim-phase.js';
import {
  type ConsumerHandler,
  type ConsumerHooks,
  type ConsumerOptions,
  type DeadLetter,
  InFlight,
  processDelivery,
  recordHandedBack,
  resolveConsumerOptions,
  settlesWithin,
} from '../consumer/index.js';
import { type Duration, MAX_TIMER_MS } from '../core/duration.js';
import { InvalidOptionsError } from '../core/errors.js';
import { callHook } from '../core/hooks.js';
import { durationOption } from '../core/option-checks.js';
import { openConnectionCheck } from './connection.js';
import {
  checkConsumerConfig,
  lastServerDelivery,
  MaxDeliverReachedError,
} from './consumer-config.js';
import { KEY_HEADER, MSG_ID_HEADER, publishDeadLetter, termReason } from './dead-letter.js';
import { holdFor } from './last-delivery.js';
import type { NatsJsMsg, NatsPublisher, NatsPullConsumer } from './nats-types.js';
import { refuseOwnDeadLetters } from './own-dead-letters.js';
import { PullLoop } from './pull.js';
import { nakDelayFor, shortestAckWindowMs } from './server-backoff.js';

export { KEY_HEADER, MSG_ID_HEADER };

/** A failure of the consumer as a whole rather than of one message. */
export interface NatsConsumerErrorEvent {
  /** The consumer's name. */
  consumer: string;
  /**
   * What failed: `consume` (the message loop ended: the JetStream consumer or its stream is gone, or the
   * connection closed without `close()`), or `fetch` (a pull failed for a reason that may pass, missed
   * heartbeats during an outage say: the loop pulls again after a second).
   */
  operation: 'consume' | 'fetch';
  /** The error (`consumer deleted`, `consumer not found`, `stream not found`, the connection closed, …). */
  error: unknown;
}

/** The shared consumer hooks, plus the one for failures of the consumer as a whole. */
export interface NatsConsumerHooks extends ConsumerHooks<NatsJsMsg> {
  /**
   * The message loop ended on an error (`consume`): the JetStream consumer or its stream was deleted (or
   * not found after missed heartbeats), or the connection closed without `close()`. `done` then resolves;
   * in-flight messages still settle where the connection allows. Recreate the consumer (and the
   * connection) and call `idempotentConsumer` again to go on. Also told of a pull that failed and is
   * retried (`fetch`).
   */
  onConsumerError?(event: NatsConsumerErrorEvent): void;
}

/** Options of {@link idempotentConsumer} for JetStream. */
export interface NatsConsumerOptions extends ConsumerOptions<NatsJsMsg> {
  /** Observation callbacks. */
  hooks?: NatsConsumerHooks;
  /** Where dead letters are published (copy of the message + error headers). Required with `publisher`. */
  deadLetterSubject?: string;
  /** A JetStream client to publish dead letters with (the PubAck is awaited before `term()`). */
  publisher?: NatsPublisher;
  /**
   * How often `working()` resets the consumer's AckWait while a message is handled (from its delivery's
   * start, the store's claim included) or waits for a slot: shorter than the consumer's
   * `ack_wait` and each entry of its `backoff`, and at most 2³¹−1 ms (about 24.8 days), a timer's limit.
   * @default a third of the consumer's `ack_wait`, or of its shortest `backoff` entry (at most 2³¹−1 ms)
   */
  workingInterval?: Duration;
}

// The options NatsConsumerOptions adds to the shared ones, checked by the compiler both ways.
const NATS_OPTION_FIELDS = {
  deadLetterSubject: true,
  publisher: true,
  workingInterval: true,
} as const satisfies Record<
  Exclude<keyof NatsConsumerOptions, keyof ConsumerOptions<NatsJsMsg>>,
  true
>;
const NATS_OPTION_NAMES = {
  who: 'idempotentConsumer (NATS JetStream)',
  own: Object.keys(NATS_OPTION_FIELDS),
};

/** A running consumer. */
export interface NatsConsumer {
  /**
   * Stop pulling and start no further message (those already pulled are `nak()`ed, for redelivery), then
   * wait for in-flight messages to settle, and for a dead letter its delivery gave up on after
   * `brokerTimeout` (its PubAck, then its `term()` and `onDeadLetter`), up to `drainTimeout` in all;
   * resolves to whether they did. Its resolving is the end of every hook call, whatever it resolved: a
   * message still in flight (or a dead letter still unanswered) when it resolved `false` settles later
   * unreported.
   */
  close(): Promise<boolean>;
  /**
   * Resolves when the message loop ends: after `close()`, or when the server ends the consumer (the
   * JetStream consumer or its stream deleted) or the connection closes, both reported to
   * `hooks.onConsumerError`. Never rejects.
   */
  readonly done: Promise<void>;
}

/** A retry held here on the server's last delivery (last-delivery.ts). */
interface HeldRetry {
  /** The retry's delay. */
  delayMs: number;
  /** The last touch before it (`performance.now()`). */
  touchedAt: number;
  /** The dead letter whose write failed, when that is the retry: written again, the handler not run. */
  letter: DeadLetter | undefined;
}

/** The default key: the `Nats-Msg-Id` header, else `x-idempotency-key`. */
export function defaultNatsKey(message: NatsJsMsg): string | undefined {
  for (const name of [MSG_ID_HEADER, KEY_HEADER]) {
    const value = message.headers?.has(name) ? message.headers.get(name) : '';
    if (value !== '') return value;
  }
  return undefined;
}

/** Pause before pulling again after a pull failed. */
const PULL_RETRY_MS = 1000;
/**
 * How many touch intervals a message may wait for a slot, with none freeing up, before it is handed back:
 * 9, three `ack_wait`s by default. Slots that free up mean progress; none for that long, stuck handlers.
 */
const MAX_WAIT_TOUCHES = 9;
/** The first server version that reads a reason after `+TERM` (nats.go `TermWithReason`: 2.10.4). */
const TERM_REASON_SERVER = '2.10.4';

/**
 * The identity of `message` across its redeliveries: stream and sequence, plus the time it was stored, as
 * a stream deleted and created again numbers its messages from 1 again.
 */
function brokerId(message: NatsJsMsg): string {
  const { stream, streamSequence, timestampNanos } = message.info;
  return `${stream}:${streamSequence}:${timestampNanos ?? 0}`;
}

/**
 * Consume a JetStream pull consumer so that each message's effect happens once per key.
 *
 * - executed or duplicate → `ack()` (after the completion is durable in the store);
 * - in progress elsewhere, store unavailable, or a handler error with deliveries left → `nak(delay)`;
 * - a handler error on the last allowed delivery (`info.deliveryCount`) → publish to `deadLetterSubject`
 *   with the error in headers, then `term()`.
 *
 * Configure the JetStream consumer with `ack_policy: explicit`, and `max_deliver` unlimited (-1) or at
 * least `maxDeliveries`: otherwise the server stops redelivering before this consumer can dead-letter.
 * A consumer configured otherwise (an ordered one included) is refused (consumer-config.ts).
 *
 * Pulls keep up to `concurrency` and a batch of messages asked for beyond the free slots (pull.ts); one that
 * arrives with every slot busy waits in a local queue with `working()`, so a message never waits in this
 * process while JetStream's `ack_wait` runs unchecked, and `close()` hands the waiting ones back (`nak`).
 * @example
 * const js = jetstream(nc);
 * const consumer = await js.consumers.get('ORDERS', 'shipping');
 * const running = await idempotentConsumer(consumer, async (msg) => ship(msg.json()), {
 *   name: 'shipping', idempotency: { store }, publisher: js, deadLetterSubject: 'dlq.orders',
 * });
 */
export async function idempotentConsumer(
  consumer: NatsPullConsumer,
  handler: ConsumerHandler<NatsJsMsg>,
  options: NatsConsumerOptions,
): Promise<NatsConsumer> {
  const resolved = resolveConsumerOptions(options, defaultNatsKey, NATS_OPTION_NAMES);
  const { publisher, deadLetterSubject } = options;
  if ((publisher === undefined) !== (deadLetterSubject === undefined)) {
    throw new InvalidOptionsError('deadLetterSubject and publisher: give both, or neither');
  }
  // A timer's interval: past MAX_TIMER_MS Node fires it at once, and `working()` would be sent in a loop.
  // A given one that long is refused; one derived from the server's `ack_wait` (months, say) is capped,
  // which only resets the AckWait sooner than needed.
  const givenWorkingMs =
    options.workingInterval === undefined || options.workingInterval === null
      ? undefined
      : durationOption(options.workingInterval, 'workingInterval', 0, { maxMs: MAX_TIMER_MS });
  // Read whatever was given: a consumer this adapter would lose messages on, or take none from, is refused
  // here rather than found out in production (consumer-config.ts).
  const { config, stream_name } = await consumer.info(true);
  const limits = checkConsumerConfig(config, resolved.policy.maxDeliveries, givenWorkingMs);
  const isLastDelivery = lastServerDelivery(config);
  if (deadLetterSubject !== undefined) {
    await refuseOwnDeadLetters(consumer, stream_name, config, deadLetterSubject);
  }
  // A third of the shortest window the server gives a delivery: ack_wait, or a shorter backoff entry
  // (server-backoff.ts), which a third of ack_wait overran, the server redelivering the message meanwhile.
  // No floor above it: one of 100 ms was the whole window of a 100 ms ack_wait (a backoff starting at
  // 100 ms), and the server redelivered the message while its handler ran.
  const workingMs =
    givenWorkingMs ??
    Math.min(Math.max(Math.floor((shortestAckWindowMs(config) ?? 30_000) / 3), 1), MAX_TIMER_MS);
  // What a nak(delay) must carry for the message to come back after the delay, under a backoff.
  const nakDelay = nakDelayFor(config);

  const inFlight = new InFlight(resolved.concurrency);
  // A reason makes older servers read `+TERM <reason>` as no term at all, and redeliver the message after
  // AckWait (each time running it again): only servers known to take one get it.
  const withReason = consumer.api?.nc?.features?.require(TERM_REASON_SERVER) === true;

  // The client drops a reply on a closed connection in silence (connection.ts): each one is checked
  // first, so that an ack that cannot be sent is reported (`onBrokerError`), not taken for a success.
  const ensureOpen = openConnectionCheck(consumer);
  const touch = (message: NatsJsMsg) => {
    ensureOpen();
    message.working();
  };

  // Aborted by close(): a delivery held on its last server delivery (last-delivery.ts) is given back then.
  const stopping = new AbortController();
  const onTouchError = (message: NatsJsMsg, error: unknown) =>
    callHook((event) => resolved.hooks.onBrokerError?.(event), {
      consumer: resolved.name,
      message,
      key: undefined,
      deliveryCount: message.info.deliveryCount,
      operation: 'touch',
      error,
    });

  // `touchedAt`: when the waiting queue last sent `working()` for the message, if it waited for a slot.
  // Processed again, in the same slot, while a retry on the server's last delivery holds it here (a nak()
  // there would drop it): the hold keeps it alive for the retry's delay, its last touch passed on.
  const deliver = async (message: NatsJsMsg, touchedAt?: number): Promise<void> => {
    let lastTouch = touchedAt;
    // A dead letter whose write failed: written again, never the handler run again (on a first delivery,
    // max_deliver 1, no record would be looked up for it).
    let pending: DeadLetter | undefined;
    // Counted into the next in-progress delay, as redeliveries would be: without them a copy held behind
    // a long holder claimed again every `minRetryDelay` for as long as the holder ran.
    for (let holds = 0; ; holds++) {
      const held = await deliverOnce(message, lastTouch, pending, holds);
      if (held === undefined) return;
      pending = held.letter;
      lastTouch = await holdFor(
        () => touch(message),
        workingMs,
        (error) => onTouchError(message, error),
        held.delayMs,
        stopping.signal,
        held.touchedAt,
      );
      if (lastTouch === undefined) return giveBackAtClose(message, held.delayMs);
    }
  };

  /**
   * close() ended the hold of a delivery the server will not make again, or handed back one that waited
   * for a slot (no `delayMs`): sent back all the same (the server drops it at once, with its advisory),
   * and reported, as every retry there was before holds.
   */
  const giveBackAtClose = (message: NatsJsMsg, delayMs?: number) => {
    let error: unknown = new MaxDeliverReachedError(config.max_deliver as number);
    try {
      ensureOpen();
      if (delayMs === undefined) message.nak();
      else message.nak(Math.ceil(nakDelay(message.info.deliveryCount, delayMs)));
    } catch (nakError) {
      error = nakError;
    }
    callHook((event) => resolved.hooks.onBrokerError?.(event), {
      consumer: resolved.name,
      message,
      key: keyOf(message),
      deliveryCount: message.info.deliveryCount,
      operation: 'retry',
      error,
    });
  };

  /** The key of `message` for a report, if it has one. */
  const keyOf = (message: NatsJsMsg) => {
    try {
      return resolved.key(message) || undefined;
    } catch {
      return undefined;
    }
  };

  /**
   * One run of `message` through the shared runner. Resolves to the retry held here (its delay, and the
   * last touch before it) when one was asked for on the server's last delivery, while the consumer runs.
   */
  const deliverOnce = async (
    message: NatsJsMsg,
    touchedAt: number | undefined,
    pendingDeadLetter: DeadLetter | undefined,
    heldRetries: number,
  ): Promise<HeldRetry | undefined> => {
    let held: HeldRetry | undefined;
    // From the delivery's start (or the queue's last touch) until its handler starts (then the handler's
    // own keep-alive, from the last touch): the store calls before it, and a decision taken without it,
    // must not let ack_wait run out (consumer/claim-phase.ts).
    const claiming = touchWhileClaiming(
      resolved,
      message,
      message.info.deliveryCount,
      () => touch(message),
      workingMs,
      touchedAt,
    );
    const stopWorking = () => claiming.stop();
    await processDelivery(resolved, stoppingAtHandler(claiming, handler), {
      message,
      deliveryCount: message.info.deliveryCount,
      brokerId: brokerId(message),
      pendingDeadLetter,
      heldRetries,
      // Nor is a dead letter given up on there after brokerTimeout: its publish failing later, no
      // redelivery would write it again, and the message was dropped at its ack_wait, unlettered.
      awaitsDeadLetter: isLastDelivery(message.info.deliveryCount),
      // On the last delivery the server's max_deliver allows, a handed-back delivery is not credited: the
      // retry it would buy is never made (the server drops the message), so a failure dead-letters instead.
      mayHandBack: !isLastDelivery(message.info.deliveryCount),
      ack: () => {
        stopWorking();
        ensureOpen();
        message.ack();
      },
      retry: (delayMs, letter) => {
        // Before the nak(delay): a working() after it would undo the delay.
        stopWorking();
        ensureOpen();
        // The server would drop the message at this nak(): held here instead (last-delivery.ts) until the
        // delay has passed, and then processed again. Touched again from the claim phase's last touch: a
        // handler's later ones are the runner's, and an earlier time only touches sooner.
        if (isLastDelivery(message.info.deliveryCount) && !stopping.signal.aborted) {
          held = { delayMs, touchedAt: claiming.touchedAt, letter };
          return;
        }
        message.nak(Math.ceil(nakDelay(message.info.deliveryCount, delayMs)));
        // Sent all the same once close() came (the server drops the message at once, with its
        // advisory), then reported: before, a message the server stopped redelivering was lost in silence.
        if (isLastDelivery(message.info.deliveryCount)) {
          throw new MaxDeliverReachedError(config.max_deliver as number);
        }
      },
      deadLetter: async (letter) => {
        // Checked before the publish (the publisher may have a connection of its own) and again before the
        // term: a letter written whose term cannot be sent fails like a letter not written, so it is
        // recorded, and the redelivery writes it again instead of running the handler.
        ensureOpen();
        // Without a DLQ subject the error is recorded in the term reason (kept by servers ≥ 2.10.4).
        if (publisher !== undefined && deadLetterSubject !== undefined) {
          await publishDeadLetter(publisher, deadLetterSubject, message, letter);
        }
        stopWorking();
        ensureOpen();
        if (withReason) message.term(termReason(letter));
        else message.term();
      },
      // working() goes on until the ack, or the dead letter (its record in the store, its publish and
      // PubAck, its term()), is done: one slower than ack_wait let the server redeliver the message
      // meanwhile, and that delivery, finding no letter recorded yet, ran the handler again (or wrote the
      // letter a second time). Never after a retry (a dead letter whose write failed turns into one): the
      // server takes a working() after nak(delay) as progress, and redelivers ack_wait after it instead
      // of after the delay. The shared runner stops the touches before it calls `retry`
      // (consumer/settle.ts); the client also drops a working() after a nak today, an undocumented detail.
      touchUntilSettled: true,
      touch: () => touch(message),
      touchIntervalMs: workingMs,
      touchedAt: () => claiming.touchedAt,
    }).finally(stopWorking);
    return held;
  };

  let closed = false;
  const report = (operation: NatsConsumerErrorEvent['operation'], error: unknown) => {
    // A hook that throws or rejects is ignored.
    callHook((event: NatsConsumerErrorEvent) => resolved.hooks.onConsumerError?.(event), {
      consumer: resolved.name,
      operation,
      error,
    });
  };
  const loop = new PullLoop({
    consumer,
    inFlight,
    name: resolved.name,
    concurrency: resolved.concurrency,
    touchIntervalMs: workingMs,
    touch,
    maxWaitMs: workingMs * MAX_WAIT_TOUCHES,
    // A message handed back on the server's last delivery would be dropped by it: it waits here instead.
    mayHandBack: (message) => !isLastDelivery(message.info.deliveryCount),
    handingBack: (message) =>
      recordHandedBack(resolved, brokerId(message), message.info.deliveryCount),
    handingBackLast: (message) => giveBackAtClose(message),
    // The key is not extracted before the message starts: reported without one.
    onTouchError,
    expiresMs: limits.expiresMs,
    maxBatch: limits.maxBatch,
    retryMs: PULL_RETRY_MS,
    deliver: (message, touchedAt) => {
      const settled = deliver(message, touchedAt);
      inFlight.run(() => settled);
      return settled;
    },
    onRetry: (error) => report('fetch', error),
  });
  // The loop rejects when the consumer, its stream or the connection is gone. Without a report the
  // service would go on running, receiving nothing, with nothing said.
  const done = loop.done
    .catch((error: unknown) => {
      if (!closed) report('consume', error);
    })
    // The loop ended (close(), or the consumer or connection gone): a delivery held on its last server
    // delivery is given back and reported, rather than held on behind a loop that took nothing more.
    .finally(() => stopping.abort());

  let closing: Promise<boolean> | undefined;
  return {
    done,
    close: () => {
      closing ??= (async () => {
        closed = true;
        stopping.abort();
        loop.stop();
        const deadline = performance.now() + resolved.drainTimeoutMs;
        // The loop ends once the open pull is closed and what it still brought is handed back (each
        // nak()ed at once), but a loop stuck elsewhere must not hold close() past the drain timeout either.
        const loopEnded = await settlesWithin(done, resolved.drainTimeoutMs);
        const drained = await inFlight.drain(Math.max(deadline - performance.now(), 0));
        // Then the dead letters their deliveries gave up on after brokerTimeout, within what is left: one
        // whose PubAck comes late is terminated and fires onDeadLetter then, which after endHooks() would
        // be lost for good (consumer/late-settles.ts).
        const settled = await resolved.lateSettles.settledBy(deadline);
        // The end of every hook call, whatever it resolves: a message still in flight, a dead letter
        // still unanswered, a pull still failing, go on unreported (consumer/hook-calls.ts).
        resolved.endHooks();
        return loopEnded && drained && settled;
      })();
      return closing;
    },
  };
}
