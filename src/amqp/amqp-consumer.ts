/**
 * The idempotent RabbitMQ consumer: thin over the shared consumer module, which makes every decision.
 * This file only declares the retry and dead-letter queues and maps decisions to channel operations.
 * @module
 */

import {
  type ConsumerHandler,
  type ConsumerOptions,
  InFlight,
  processDelivery,
  resolveConsumerOptions,
} from '../consumer/index.js';
import { InvalidOptionsError } from '../core/errors.js';
import { AckBatcher } from './acks.js';
import type { AmqpConfirmChannel, AmqpMessage } from './amqp-types.js';
import { AmqpDelivery, AmqpSettler } from './delivery.js';
import { defaultAmqpKey } from './headers.js';

/** Options of {@link idempotentConsumer} for RabbitMQ. */
export interface AmqpConsumerOptions extends ConsumerOptions<AmqpMessage> {
  /** The queue to consume. The adapter does not declare it (its arguments are yours). */
  queue: string;
  /**
   * The retry queue: copies wait there for their per-message TTL, then RabbitMQ dead-letters them back to
   * `queue` through the default exchange. No plugin needed. @default `${queue}.retry`
   */
  retryQueue?: string;
  /** Where dead letters go, with the error recorded in headers. @default `${queue}.dlq` */
  deadLetterQueue?: string;
  /** Declare the retry and dead-letter queues (durable) at start. @default true */
  declare?: boolean;
  /** Prefetch (unacked deliveries in flight); also the concurrency. @default `concurrency` (10) */
  prefetch?: number;
}

/** A running consumer. */
export interface AmqpConsumer {
  /** The broker's consumer tag. */
  readonly consumerTag: string;
  /**
   * Stop receiving, then wait (up to `drainTimeout`) for in-flight messages to be settled. The channel is
   * yours and stays open. Resolves to whether everything drained in time.
   */
  close(): Promise<boolean>;
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
 *   queue, then the original is acked.
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
  const resolved = resolveConsumerOptions(options, defaultAmqpKey);
  if (typeof channel?.waitForConfirms !== 'function') {
    throw new InvalidOptionsError(
      'channel: pass a confirm channel (connection.createConfirmChannel()); retry and dead-letter copies must be confirmed before the original is acked',
    );
  }
  if (typeof options.queue !== 'string' || options.queue === '') {
    throw new InvalidOptionsError('queue: the queue to consume is required');
  }
  const queue = options.queue;
  const retryQueue = options.retryQueue ?? `${queue}.retry`;
  const deadLetterQueue = options.deadLetterQueue ?? `${queue}.dlq`;
  const prefetch = options.prefetch ?? resolved.concurrency;
  if (!Number.isSafeInteger(prefetch) || prefetch < 1) {
    throw new InvalidOptionsError(`prefetch: must be a positive integer, got ${String(prefetch)}`);
  }
  if (options.declare ?? true) {
    await channel.assertQueue(retryQueue, {
      durable: true,
      arguments: { 'x-dead-letter-exchange': '', 'x-dead-letter-routing-key': queue },
    });
    await channel.assertQueue(deadLetterQueue, { durable: true });
  }
  await channel.prefetch(prefetch);

  const inFlight = new InFlight(prefetch);
  const settler = new AmqpSettler(channel, new AckBatcher(channel), retryQueue, deadLetterQueue);
  const { consumerTag } = await channel.consume(queue, (message) => {
    // null: the broker cancelled the consumer (queue deleted); in-flight messages still settle.
    if (message === null) return;
    settler.acks.delivered(message);
    inFlight.add(processDelivery(resolved, handler, new AmqpDelivery(settler, message)));
  });

  let closing: Promise<boolean> | undefined;
  return {
    consumerTag,
    close: () => {
      closing ??= (async () => {
        try {
          await channel.cancel(consumerTag);
        } catch {
          // A closed channel has no consumer left to cancel; its unacked messages are requeued by the broker.
        }
        return inFlight.drain(resolved.drainTimeoutMs);
      })();
      return closing;
    },
  };
}
