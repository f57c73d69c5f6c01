/**
 * The idempotent RabbitMQ consumer: thin over the shared consumer module, which makes every decision.
 * This file only declares the retry and dead-letter queues and maps decisions to channel operations.
 * @module
 */

import {
  type ConsumerHandler,
  type ConsumerHooks,
  type ConsumerOptions,
  processDelivery,
  resolveConsumerOptions,
  settlesWithin,
} from '../consumer/index.js';
import { InvalidOptionsError } from '../core/errors.js';
import { callHook } from '../core/hooks.js';
import { booleanOption } from '../core/option-checks.js';
import { AckBatcher } from './acks.js';
import type { AmqpConfirmChannel, AmqpMessage } from './amqp-types.js';
import { channelListeners } from './channel-listeners.js';
import { type AmqpRetryQueueType, declareQueues, retryQueueType } from './declare.js';
import { AmqpDelivery, AmqpSettler } from './delivery.js';
import { HandlerSlots } from './handler-slots.js';
import { defaultAmqpKey } from './headers.js';
import { amqpQueues } from './queues.js';

/** A failure of the consumer as a whole rather than of one message. */
export interface AmqpConsumerErrorEvent {
  /** The consumer's name. */
  consumer: string;
  /**
   * What ended it: `cancelled` (the broker cancelled the consumer: its queue was deleted) or
   * `channel-closed` (the channel closed under it: a broker restart, a lost connection, a channel error).
   */
  operation: 'cancelled' | 'channel-closed';
  /** What happened, as an error. */
  error: unknown;
}

/** The shared consumer hooks, plus the one for failures of the consumer as a whole. */
export interface AmqpConsumerHooks extends ConsumerHooks<AmqpMessage> {
  /**
   * The consumer stopped receiving without `close()`: the broker cancelled it or its channel closed.
   * `done` then resolves; messages in flight still settle where the channel allows (unacked ones are
   * requeued by the broker). Open a channel and call `idempotentConsumer` again to go on.
   */
  onConsumerError?(event: AmqpConsumerErrorEvent): void;
}

/** Options of {@link idempotentConsumer} for RabbitMQ. */
export interface AmqpConsumerOptions extends ConsumerOptions<AmqpMessage> {
  /** Observation callbacks. */
  hooks?: AmqpConsumerHooks;
  /**
   * The queue to consume. The adapter does not declare it (its arguments are yours); it checks that it
   * exists before declaring the retry and dead-letter queues.
   */
  queue: string;
  /**
   * The retry queue: copies wait there for their per-message TTL, then RabbitMQ dead-letters them back to
   * `queue` through the default exchange. No plugin needed. Must differ from `queue`.
   * @default `${queue}.retry`
   */
  retryQueue?: string;
  /**
   * The type of retry queue the adapter declares. `'classic'` dead-letters a copy back to `queue` at most
   * once: if `queue` refuses it then (full with `x-overflow: reject-publish`, deleted, a quorum queue
   * without a leader), RabbitMQ drops it silently. `'quorum'` (RabbitMQ 3.10+) declares a quorum queue
   * with `x-dead-letter-strategy: at-least-once` and `x-overflow: reject-publish`: the copy is kept until
   * `queue` takes it. An existing retry queue of the other type fails the declaration with an
   * `InvalidOptionsError` (see docs/consumers/amqp.md for the migration).
   * @default 'classic'
   */
  retryQueueType?: AmqpRetryQueueType;
  /**
   * Where dead letters go, with the error recorded in headers. Must differ from `queue` and `retryQueue`.
   * @default `${queue}.dlq`
   */
  deadLetterQueue?: string;
  /**
   * Declare the retry and dead-letter queues (durable) at start. One that exists with other arguments
   * fails with an `InvalidOptionsError` (RabbitMQ closes the channel). @default true
   */
  declare?: boolean;
  /**
   * Prefetch (unacked deliveries in flight), 1–65535. Also the concurrency, unless `concurrency` is set
   * lower: then the deliveries beyond it wait in the process for a handler slot.
   * @default `concurrency` (10)
   */
  prefetch?: number;
}

// The options AmqpConsumerOptions adds to the shared ones, checked by the compiler both ways.
const AMQP_OPTION_FIELDS = {
  queue: true,
  retryQueue: true,
  retryQueueType: true,
  deadLetterQueue: true,
  declare: true,
  prefetch: true,
} as const satisfies Record<
  Exclude<keyof AmqpConsumerOptions, keyof ConsumerOptions<AmqpMessage>>,
  true
>;
const AMQP_OPTION_NAMES = {
  who: 'idempotentConsumer (RabbitMQ)',
  own: Object.keys(AMQP_OPTION_FIELDS),
};

/** A running consumer. */
export interface AmqpConsumer {
  /** The broker's consumer tag. */
  readonly consumerTag: string;
  /**
   * Stop receiving (a message the broker still delivers is `nack`ed back to the queue once it took the
   * cancel in, never started), then wait for the broker's cancel, for in-flight messages to be settled,
   * and for the broker to have taken their acks in (a round trip that changes nothing: a passive declare
   * of `amq.direct`, the channel's prefetch left as it is), up to `drainTimeout` in all. A retry or
   * dead-letter copy its delivery gave up on after `brokerTimeout` is waited for too (its confirm, then
   * its original's ack; a dead letter's `onDeadLetter`). The channel is yours and stays open. Resolves
   * to whether all of it happened in time. Its resolving is the end of every hook call, whatever it
   * resolved: a message still in flight (or a copy still unconfirmed) when it resolved `false` settles
   * later unreported.
   */
  close(): Promise<boolean>;
  /**
   * Resolves when the consumer stops receiving: after `close()`, or when the broker cancels it (its queue
   * deleted) or its channel closes, both reported to `hooks.onConsumerError`. Never rejects. A service
   * awaits it to recreate the consumer, or to exit and let its supervisor restart it.
   */
  readonly done: Promise<void>;
}

/**
 * Consume `options.queue` so that each message's effect happens once per key, whatever the broker
 * redelivers.
 *
 * - executed or duplicate → ack (after the completion is durable in the store);
 * - in progress elsewhere, store unavailable, or a handler error with deliveries left → a confirmed copy
 *   with a per-message TTL goes to the retry queue, then the original is acked; the copy comes back after
 *   the delay;
 * - a handler error on the last allowed delivery → a confirmed copy with the error goes to the dead-letter
 *   queue, then the original is acked;
 * - a message whose own headers leave no room in amqplib's 64 KB header table for a retry copy's (none of
 *   them can be left out: the handler would run on another message) → a handler error is dead-lettered at
 *   once (`headers_too_large`), and any other retry holds the message for its delay, then processes it
 *   again unchanged in this process (a requeue would count toward a quorum queue's `delivery-limit`),
 *   handing it back to `queue` (`nack` with requeue) once held 10 minutes, or at `close()` once
 *   cancelled. Never held unacked for good.
 *
 * Copies are published `mandatory`: one the broker returns (its queue does not exist) counts as failed,
 * the original is not acked, and `hooks.onBrokerError` reports it.
 *
 * Acks decided in the same turn of the event loop are written together, as a single multiple ack while
 * this consumer is the only one on its channel (see `acks.ts`); nothing is acked earlier for it.
 *
 * RabbitMQ has no way to extend a delivery's timer: keep handlers shorter than the broker's
 * `consumer_timeout` (30 minutes by default), or the channel is closed and the message requeued.
 * @example
 * const connection = await amqplib.connect(url);
 * const channel = await connection.createConfirmChannel();
 * await channel.assertQueue('orders', { durable: true });
 * const consumer = await idempotentConsumer(channel, async (msg) => ship(JSON.parse(msg.content.toString())), {
 *   queue: 'orders', name: 'shipping', idempotency: { store: redisStore({ client }) },
 * });
 * process.on('SIGTERM', () => consumer.close());
 */
export async function idempotentConsumer(
  channel: AmqpConfirmChannel,
  handler: ConsumerHandler<AmqpMessage>,
  options: AmqpConsumerOptions,
): Promise<AmqpConsumer> {
  const resolved = resolveConsumerOptions(options, defaultAmqpKey, AMQP_OPTION_NAMES);
  if (typeof channel?.waitForConfirms !== 'function') {
    throw new InvalidOptionsError(
      'channel: pass a confirm channel (connection.createConfirmChannel()); retry and dead-letter copies must be confirmed before the original is acked',
    );
  }
  if (typeof channel.on !== 'function' || typeof channel.removeListener !== 'function') {
    throw new InvalidOptionsError(
      "channel: the channel must emit 'return' (an amqplib channel does): unroutable copies are detected by it",
    );
  }
  const { queue, retryQueue, deadLetterQueue, prefetch } = amqpQueues(
    options,
    resolved.concurrency,
  );
  const declare = booleanOption(options.declare, 'declare', true);
  const retryType = retryQueueType(options.retryQueueType);
  // Before declaring anything: a queue that does not exist must not leave a retry and a dead-letter queue
  // behind. (RabbitMQ closes the channel on the failed check, as it would on the consume.)
  await channel.checkQueue(queue);
  if (declare) await declareQueues(channel, { queue, retryQueue, deadLetterQueue }, retryType);
  await channel.prefetch(prefetch);

  // A held message's delay ended (held-requeues.ts): processed again, unless close() was called, when it
  // is handed back with the deliveries that came after it.
  const rerun = (message: AmqpMessage, runs: number) => {
    if (!stopping) slots.deliver(new AmqpDelivery(settler, message, runs));
    else if (handBackAfterCancel !== undefined) handBackAfterCancel.push(message);
    else handBack(message);
  };
  const settler = new AmqpSettler(
    channel,
    new AckBatcher(channel),
    retryQueue,
    deadLetterQueue,
    rerun,
  );
  const slots = new HandlerSlots(prefetch, options.concurrency, (delivery: AmqpDelivery) =>
    processDelivery(resolved, handler, delivery),
  );
  // Hand back deliveries received and never started: requeued at once for another consumer, rather than
  // held unacked until the channel closes.
  const handBack = (message: AmqpMessage) => {
    try {
      channel.nack(message, false, true);
    } catch {
      // The channel is closed: the broker requeues it anyway.
    }
  };
  // Shared with the channel's other consumers: one listener per event on the channel (channel-listeners.ts).
  const listeners = channelListeners(channel);
  listeners.addReturn(settler.returns.listener);
  // The channel may outlive this consumer (the application's, reused for the next one): once every delivery
  // has settled and no copy of ours awaits its confirm, the channel keeps nothing of this consumer.
  // Not before: a copy still awaiting its confirm may yet be returned (a return comes before the confirm),
  // also one given up on after brokerTimeout, whose delivery no longer holds a slot (returns.ts).
  let released = false;
  const releaseChannel = () => {
    if (released) return;
    released = true;
    void slots
      .idle()
      .then(() => settler.returns.idle())
      .then(() => {
        listeners.removeReturn(settler.returns.listener);
      });
  };
  // Ends once: by close(), or by the broker (reported). Without it, a cancelled consumer or a closed
  // channel would leave the service running and receiving nothing, with nothing said.
  let closed = false;
  // Set by close(): deliveries that arrive after it are handed back, never started.
  let stopping = false;
  // While close() waits for the broker's cancel-ok: the deliveries to hand back once it came. Handed back
  // before it, a delivery went straight back to this consumer, still registered, which handed it back
  // again (each time one more `x-delivery-count` on a quorum queue, toward `maxDeliveries` and the
  // queue's `delivery-limit`): measured on RabbitMQ 3.10, a message waiting for a slot came back to the
  // next consumer counted 3, dead-lettered after a single failed run with `maxDeliveries: 3`.
  let handBackAfterCancel: AmqpMessage[] | undefined;
  let end!: () => void;
  const done = new Promise<void>((resolve) => {
    end = resolve;
  });
  const stopped = (operation: AmqpConsumerErrorEvent['operation'], message: string) => {
    listeners.removeClose(onClose);
    if (closed) return end();
    closed = true;
    // A hook that throws or rejects is ignored.
    callHook((event: AmqpConsumerErrorEvent) => resolved.hooks.onConsumerError?.(event), {
      consumer: resolved.name,
      operation,
      error: new Error(message),
    });
    end();
    // Held messages go back to the queue at once (none is processed again after `done`); after a channel
    // close, already there (dropped first by onClose).
    settler.held.requeueAll();
    // Ended by the broker, not by close(): a cancel leaves the channel open, and the application may start
    // another consumer on it. Before, each cancel left its `return` listener on the channel for good.
    releaseChannel();
  };
  const onClose = () => {
    // The broker requeued every unacked message with the channel: one not started yet never will be, nor
    // will a held one be processed again (another consumer may be running it by now).
    slots.takeWaiting();
    settler.held.dropAll();
    stopped(
      'channel-closed',
      `the channel of consumer '${resolved.name}' on '${queue}' closed: nothing more is received`,
    );
  };
  listeners.addClose(onClose);
  let consumerTag: string;
  try {
    ({ consumerTag } = await channel.consume(queue, (message) => {
      // null: the broker cancelled the consumer (queue deleted); in-flight messages still settle.
      if (message === null) {
        stopped(
          'cancelled',
          `the broker cancelled consumer '${resolved.name}' on '${queue}' (was the queue deleted?)`,
        );
        return;
      }
      if (stopping) {
        // Sent before the broker took the cancel in (or after a cancel close() stopped waiting for): not
        // started behind a close() that may already have resolved, but handed back for another consumer
        // as soon as the broker took the cancel in (at once after it), rather than held unacked until the
        // channel closes. Not recorded with the acks: no later multiple ack may cover it, and none can,
        // as every ack to come is of an earlier tag.
        if (handBackAfterCancel === undefined) handBack(message);
        else handBackAfterCancel.push(message);
        return;
      }
      settler.acks.delivered(message);
      slots.deliver(new AmqpDelivery(settler, message));
    }));
  } catch (error) {
    listeners.removeReturn(settler.returns.listener);
    listeners.removeClose(onClose);
    throw error;
  }

  let closing: Promise<boolean> | undefined;
  return {
    consumerTag,
    done,
    close: () => {
      closing ??= (async () => {
        closed = true;
        stopping = true;
        listeners.removeClose(onClose);
        // Waiting for a handler slot (concurrency below the prefetch): never started either, handed back
        // with the ones still to come once the broker took the cancel in. Their tags stay unsettled for
        // the ack batcher, so no multiple ack covers them.
        handBackAfterCancel = slots.takeWaiting().map((delivery) => delivery.message);
        const deadline = performance.now() + resolved.drainTimeoutMs;
        // A broker that hangs without closing the connection (a network partition) never answers the
        // cancel, and amqplib has no timeout of its own: only its heartbeat ends the connection, minutes
        // later. The wait for the cancel counts against the drain timeout.
        const cancelled = await settlesWithin(
          channel.cancel(consumerTag).catch(() => {
            // A closed channel has no consumer left to cancel; the broker requeues its unacked messages.
          }),
          resolved.drainTimeoutMs,
        );
        // Held for a delay because no retry copy of them can be made (held-requeues.ts): back now, once the
        // broker took the cancel in. Before it, the broker gave each one straight back to this consumer,
        // which handed it back again: one more delivery, counted by a quorum queue's delivery-limit.
        settler.held.requeueAll();
        const unstarted = handBackAfterCancel;
        handBackAfterCancel = undefined;
        for (const message of unstarted) handBack(message);
        end();
        const drained = await slots.inFlight.drain(Math.max(deadline - performance.now(), 0));
        // Then the copies their deliveries gave up on after brokerTimeout, within what is left: a dead
        // letter confirmed late fires onDeadLetter then, which after endHooks() would be lost for good
        // (consumer/late-settles.ts).
        const settled = await resolved.lateSettles.settledBy(deadline);
        // The acks (and hand-backs) written since are only queued in amqplib: a connection closed right
        // after close() resolved went out before them, and RabbitMQ requeued every message acked after
        // the cancel, to be delivered again (counted by a quorum queue's delivery-limit). Measured on
        // RabbitMQ 3.10, classic and quorum queues alike: an ack then `connection.close()` at once left the
        // message in the queue, 5 times out of 5. The channel answers a method only once it has taken
        // every frame before it: a passive declare of `amq.direct`, which changes nothing (every vhost has
        // it, it cannot be deleted, and a passive declare needs no permission; the default exchange `''`
        // is refused with a 403, which closes the channel). Not a `basic.qos`, as before: it set this
        // consumer's prefetch again for every consumer the application starts on the channel later.
        const flushed = await settlesWithin(
          channel.checkExchange('amq.direct').catch(() => {
            // A closed channel: the broker requeued whatever was unacked on it.
          }),
          Math.max(deadline - performance.now(), 0),
        );
        // After a drain that timed out too, once the last delivery settles: before, the listener stayed on
        // the channel for good, one more with every consumer closed while a handler was still running.
        releaseChannel();
        // The end of every hook call, whatever it resolves: a handler still running, a copy confirmed late,
        // go on unreported (consumer/hook-calls.ts).
        resolved.endHooks();
        return cancelled && drained && settled && flushed;
      })();
      return closing;
    },
  };
}
