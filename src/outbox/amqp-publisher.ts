/**
 * RabbitMQ publisher on a **confirm channel**: a publish resolves when the broker acknowledged the message,
 * with the stable id as the AMQP `messageId` property. No runtime import of amqplib.
 * @module
 */
import { InvalidOptionsError } from '../core/errors.js';
import { booleanOption, knownFields } from '../core/option-checks.js';
import { channelReturns, type ReturningChannel } from './amqp-returns.js';
import type { OutboxMessage } from './message.js';
import type { Publisher } from './publisher.js';

/** The slice of an amqplib `ConfirmChannel` (`connection.createConfirmChannel()`) the publisher uses. */
export interface AmqpConfirmChannelLike extends ReturningChannel {
  /** Publish; `callback` runs when the broker acks (error `null`) or nacks the message. */
  publish(
    exchange: string,
    routingKey: string,
    content: Buffer,
    options: Record<string, unknown>,
    callback: (error: unknown, ok?: unknown) => void,
  ): boolean;
  /**
   * Resolve once every outstanding publish is confirmed. The publisher never calls it: only a confirm
   * channel has it, and a plain `createChannel()` channel, which takes `publish`'s callback and never
   * calls it, must be told apart (see {@link amqpPublisher}).
   */
  waitForConfirms(): Promise<void>;
}

/**
 * Where the publisher gets its channel: a confirm channel, or a function giving the channel to use now.
 * amqplib never reopens a channel: once RabbitMQ closes it (a broker restart, a publish to an exchange that
 * does not exist) every publish on it fails. A function lets the application hand over the channel it
 * re-created (or one from a reconnecting wrapper), so the relay recovers without a restart.
 */
export type AmqpChannelSource =
  | AmqpConfirmChannelLike
  | (() => AmqpConfirmChannelLike | Promise<AmqpConfirmChannelLike>);

/** Options of {@link amqpPublisher}. */
export interface AmqpPublisherOptions {
  /**
   * A confirm channel, or a function called before each publish that gives the current one (see
   * {@link AmqpChannelSource}): the same channel object until it closes, not a new one per call. While a
   * publish awaits its confirm, the channel has one `return` listener, shared by every publisher on it.
   * A plain channel (`createChannel()`) never calls the confirm callback and is refused (it has no
   * `waitForConfirms`), here or when the function returns one.
   */
  channel: AmqpChannelSource;
  /** Exchange to publish to; `''` is the default exchange (routing key = queue name). @default '' */
  exchange?: string;
  /** Routing key of a message. @default (message) => message.topic */
  routingKey?: (message: OutboxMessage) => string;
  /** Persistent (delivery mode 2), so a broker restart keeps queued messages. @default true */
  persistent?: boolean;
  /**
   * Publish as mandatory and fail a publish the broker returns as unroutable (no queue bound): the row stays
   * unsent and is retried, instead of being marked sent while the message was dropped. @default true
   */
  mandatory?: boolean;
}

/** Header carrying the message's business key (AMQP has no property for it). */
export const AMQP_KEY_HEADER = 'x-outbox-key';

// Every key of AmqpPublisherOptions, checked by the compiler both ways: a misspelt option is refused
// instead of leaving its default in force.
const PUBLISHER_FIELDS = Object.keys({
  channel: true,
  exchange: true,
  routingKey: true,
  persistent: true,
  mandatory: true,
} as const satisfies Record<keyof AmqpPublisherOptions, true>);

/**
 * Create a RabbitMQ publisher. Each message is sent with `messageId` = the outbox message id (the amqp
 * idempotent consumer reads it as the dedup key), `type` = topic, its content type and headers, and
 * `x-outbox-key` = its key.
 * @example
 * const channel = await connection.createConfirmChannel();
 * const publisher = amqpPublisher({ channel, exchange: 'events' });
 */
export function amqpPublisher(options: AmqpPublisherOptions): Publisher {
  const source = options?.channel;
  if (typeof source !== 'function' && !isConfirmChannel(source)) {
    throw new InvalidOptionsError(
      `amqpPublisher: \`channel\` must be an amqplib confirm channel, or a function returning one; ${PLAIN_CHANNEL}`,
    );
  }
  knownFields(options, 'amqpPublisher', PUBLISHER_FIELDS);
  const exchange = options.exchange ?? '';
  const routingKey = options.routingKey ?? ((message: OutboxMessage) => message.topic);
  const persistent = booleanOption(options.persistent, 'amqpPublisher: persistent', true);
  const mandatory = booleanOption(options.mandatory, 'amqpPublisher: mandatory', true);
  // Checked, not coerced: `mandatory: 'false'` would be sent as truthy, a non-string exchange fails every
  // publish, and a routing key that is not a function fails every row on every attempt.
  if (typeof exchange !== 'string') {
    throw new InvalidOptionsError('amqpPublisher: `exchange` must be a string');
  }
  if (typeof routingKey !== 'function') {
    throw new InvalidOptionsError('amqpPublisher: `routingKey` must be a function of the message');
  }
  const current = async (): Promise<AmqpConfirmChannelLike> => {
    if (typeof source !== 'function') return source;
    const channel = await source();
    if (!isConfirmChannel(channel)) {
      throw new InvalidOptionsError(
        `amqpPublisher: the \`channel\` function must return an amqplib confirm channel; ${PLAIN_CHANNEL}`,
      );
    }
    return channel;
  };

  return {
    async publish(message, options) {
      const headers: Record<string, unknown> = { ...message.headers };
      if (message.key !== null) headers[AMQP_KEY_HEADER] = message.key;
      const properties = {
        messageId: message.id,
        type: message.topic,
        contentType: message.contentType,
        timestamp: Math.floor(message.createdAt / 1000),
        persistent,
        mandatory,
        headers,
      };
      const content = Buffer.from(
        message.payload.buffer,
        message.payload.byteOffset,
        message.payload.byteLength,
      );
      const key = routingKey(message);
      const channel = await current();
      // Returns are judged per channel and per publish (amqp-returns.ts): a channel that closes between a
      // return and its confirm fails the publish with the close, and the row's next publish, on a new
      // channel, is judged on its own.
      const returns = mandatory ? channelReturns(channel) : undefined;
      const signal = options?.signal;
      return new Promise<void>((resolve, reject) => {
        // The watch ends once: with the confirm, a synchronous throw, or when the relay gave up (signal).
        // Kept until the confirm, a publish that timed out on a channel that hangs without closing held
        // its entry, and the channel's `return` listener, for as long as the channel lived.
        let watching = true;
        const unwatch = (): boolean => {
          if (!watching) return false;
          watching = false;
          signal?.removeEventListener('abort', onGivenUp);
          return returns?.settled(message.id) ?? false;
        };
        const onGivenUp = () => {
          unwatch();
          reject(signal?.reason ?? new Error(`publish of message ${message.id} abandoned`));
        };
        if (signal?.aborted) {
          reject(signal.reason);
          return;
        }
        returns?.watch(message.id);
        signal?.addEventListener('abort', onGivenUp, { once: true });
        try {
          channel.publish(exchange, key, content, properties, (error) => {
            // A confirm after the relay gave up: the publish already failed, and a new one may watch
            // the id now; this one's return (if any) was counted for nothing.
            if (!watching) return;
            const returned = unwatch();
            if (error !== null && error !== undefined) {
              reject(
                error instanceof Error ? error : new Error(`broker nacked message ${message.id}`),
              );
            } else if (returned) {
              reject(
                new Error(
                  `unroutable: no queue bound for ${JSON.stringify(key)} on exchange ${JSON.stringify(exchange)}`,
                ),
              );
            } else {
              resolve();
            }
          });
        } catch (error) {
          // A closed channel throws synchronously.
          unwatch();
          reject(error);
        }
      });
    },
  };
}

const PLAIN_CHANNEL =
  'a plain channel (createChannel()) never confirms: each attempt would put another copy on the queue, ' +
  'time out, and the row would be published again forever without being marked sent';

// A plain amqplib channel has `publish` and `on` too, and its publish ignores the callback: the message
// is delivered but never confirmed. Only a confirm channel (amqplib's, or a reconnecting wrapper's) has
// `waitForConfirms`, so that is what tells them apart.
function isConfirmChannel(value: unknown): value is AmqpConfirmChannelLike {
  const channel = value as Partial<AmqpConfirmChannelLike> | null | undefined;
  return (
    typeof channel?.publish === 'function' &&
    typeof channel.on === 'function' &&
    typeof channel.waitForConfirms === 'function'
  );
}
