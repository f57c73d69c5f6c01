/**
 * The exchange and routing key a message was published with, carried by its retry copies and its dead
 * letter. A retry copy reaches the queue again from the retry queue, through the default exchange with
 * the queue's name as its routing key; RabbitMQ's `x-death` names only the copy's own publish. So the
 * routing of the application's publish would be lost with the first retry: a handler that tells its
 * messages apart by routing key (one queue bound to `payment.capture` and `payment.refund`) saw every
 * retry as a message for the routing key `orders`, and a dead letter did not say where to replay it.
 * @module
 */
import type { AmqpMessage } from './amqp-types.js';

/** On a retry copy and a dead letter: the exchange the message was published to (`''`: the default). */
export const EXCHANGE_HEADER = 'x-idempotency-exchange';
/** On a retry copy and a dead letter: the routing key the message was published with. */
export const ROUTING_KEY_HEADER = 'x-idempotency-routing-key';

/**
 * The headers recording the routing of `message` as its handler saw it: for a retry copy, the routing
 * restored by {@link asPublished}, so it is carried through every later copy.
 */
export function routingHeaders(message: AmqpMessage): Record<string, string> {
  return {
    [EXCHANGE_HEADER]: message.fields.exchange,
    [ROUTING_KEY_HEADER]: message.fields.routingKey,
  };
}

function text(value: unknown): string | undefined {
  const decoded = Buffer.isBuffer(value) ? value.toString('utf8') : value;
  return typeof decoded === 'string' ? decoded : undefined;
}

/**
 * A retry copy as its handler sees it: `fields.exchange` and `fields.routingKey` those of the
 * application's publish, from the copy's headers. A copy without them (published by an earlier version)
 * is returned as it is, and so is a message that did not come back from `retryQueue` (see
 * {@link cameBackFrom}): the application's own message, and a dead letter replayed to the queue (a new
 * message), are routed as they were published.
 */
export function asPublished(copy: AmqpMessage, retryQueue: string): AmqpMessage {
  if (!cameBackFrom(copy, retryQueue)) return copy;
  const headers = copy.properties.headers;
  const exchange = text(headers?.[EXCHANGE_HEADER]);
  const routingKey = text(headers?.[ROUTING_KEY_HEADER]);
  if (exchange === undefined || routingKey === undefined) return copy;
  // A new object rather than a change to amqplib's: only the delivery tag is read to settle it.
  return { ...copy, fields: { ...copy.fields, exchange, routingKey } };
}

/**
 * Whether `message` came back to the queue from `retryQueue`: through the default exchange, its last
 * death (RabbitMQ's `x-death`, newest first) the expiry of a copy in that queue. Only then are the routing
 * headers taken for the routing the handler sees. Read from any message carrying them, a publisher allowed
 * to publish only some routing keys (topic permissions) could make the handler see another one, since the
 * headers are the publisher's to set; forging a return from the retry queue needs write access to the
 * default exchange as well, which lets it reach the queue under any name anyway.
 */
export function cameBackFrom(message: AmqpMessage, retryQueue: string): boolean {
  if (message.fields.exchange !== '') return false;
  const deaths = message.properties.headers?.['x-death'];
  if (!Array.isArray(deaths) || deaths.length === 0) return false;
  const last = deaths[0] as Record<string, unknown> | undefined;
  return text(last?.queue) === retryQueue && text(last?.reason) === 'expired';
}
