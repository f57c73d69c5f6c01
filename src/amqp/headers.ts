/**
 * Headers the RabbitMQ adapter reads and writes: the delivery counter it carries across retry copies, the
 * default key extractor, and the copy of a message sent to the retry or dead-letter queue.
 * @module
 */
import type { DeadLetter } from '../consumer/index.js';
import { MAX_KEY_LENGTH } from '../core/key.js';
import type { AmqpMessage, AmqpPublishOptions } from './amqp-types.js';
import { fitHeaders } from './header-room.js';
import { PENDING_DEAD_LETTER_HEADER, pendingLetterHeader } from './pending-letter.js';
import { COPY_ID_HEADER, newCopyId } from './returns.js';
import { routingHeaders } from './routing.js';

/**
 * On a retry copy: deliveries made before it was published (our own counter). Not on a dead letter, so
 * that a dead letter replayed to the queue starts counting afresh.
 */
export const DELIVERIES_HEADER = 'x-idempotency-deliveries';
/** On a dead letter: deliveries made, the last one included. */
export const DEAD_LETTER_DELIVERIES_HEADER = 'x-idempotency-dead-letter-deliveries';
/** The default idempotency-key header. */
export const KEY_HEADER = 'x-idempotency-key';
/** On a dead letter: why, as a {@link DeadLetterReason}. */
export const DEAD_LETTER_REASON_HEADER = 'x-idempotency-dead-letter-reason';
/**
 * On a dead letter: the last error, as JSON `{ name, message, code? }`, the message cut to 4,096
 * characters (see `describeError`).
 */
export const ERROR_HEADER = 'x-idempotency-error';
/**
 * On a retry copy: its own identity, new for each copy and the same on its redeliveries by the broker (a
 * requeued message is unchanged), under which its dead letter is recorded in the store (see
 * `consumer/given-up.ts`). Never carried forward: not on the next retry copy, nor on a dead letter, whose
 * replay to the queue is a new message.
 */
export const DELIVERY_ID_HEADER = 'x-idempotency-delivery-id';
/** On a dead letter: the consumer that gave up. */
export const CONSUMER_HEADER = 'x-idempotency-consumer';
/** On a dead letter: when, ISO 8601. */
export const FAILED_AT_HEADER = 'x-idempotency-failed-at';
/**
 * On a retry copy and a dead letter: the `user-id` property of the original message. The copy cannot keep
 * the property itself: RabbitMQ closes the channel of a publish whose `user-id` is not the user the
 * connection logged in as. A header is not validated by RabbitMQ: it says who sent the original, as
 * RabbitMQ checked it then, only to a reader who trusts every publisher to the queue.
 */
export const USER_ID_HEADER = 'x-idempotency-user-id';

// Headers RabbitMQ adds when dead-lettering (from the retry queue). Dropped from our copies so they do not
// pile up across retries; the broker adds them afresh.
const BROKER_HEADERS = /^x-(death|first-death-|last-death-|delivery-count)/;
// Sender-selected distribution: RabbitMQ routes a publish to the queues `CC` and `BCC` name as well, and
// keeps `CC` on the delivered message. They told the original publish where to go; a copy that kept `CC`
// went to those queues again (a second payment message for the ledger at each retry and dead letter).
// RabbitMQ drops them too when it dead-letters a message.
const ROUTING_HEADERS = new Set(['CC', 'BCC']);
// Properties a copy does not take from its original: rebuilt (`headers`), its own (`expiration`,
// `deliveryMode`), or validated by RabbitMQ against the publishing connection's user (`userId`, see
// `copyOptions`).
const OWN_PROPERTIES = new Set(['headers', 'expiration', 'deliveryMode', 'userId']);
/**
 * AMQP `delivery-mode` 2, persistent: every copy is written to disk by the durable retry or dead-letter
 * queue before RabbitMQ confirms it. A copy kept the original's mode, and amqplib publishes transient
 * (mode 1) unless told otherwise: a quorum queue keeps such a message across a broker restart, but the
 * classic queue its copy went to confirmed it from memory, and the restart dropped it, after the original
 * was acked on that confirm (the message lost).
 */
const PERSISTENT_DELIVERY_MODE = 2;
// Headers that belong to one copy only (see `returns.ts`, `pending-letter.ts`); never carried forward.
const COPY_HEADERS = new Set([COPY_ID_HEADER, PENDING_DEAD_LETTER_HEADER, DELIVERY_ID_HEADER]);

function toInteger(value: unknown): number | undefined {
  const n =
    typeof value === 'number' ? value : typeof value === 'string' ? Number(value) : Number.NaN;
  return Number.isSafeInteger(n) && n >= 0 ? n : undefined;
}

/**
 * Deliveries of this message so far, this one included. Classic queues have no delivery counter, and a
 * retry copy starts a new message anyway, so the adapter carries its own count in
 * `x-idempotency-deliveries` and adds this copy's broker redeliveries: `x-delivery-count` on quorum
 * queues, else 1 if the `redelivered` flag is set (a crash or lost connection; a lower bound).
 *
 * Only a delivery with `redelivered` set has any: RabbitMQ leaves an `x-delivery-count` the message
 * already carried (forwarded from a quorum queue by a shovel or a service) as it is on a first delivery,
 * on quorum queues too, and reading it there dead-lettered the message before its `maxDeliveries`.
 */
export function deliveryCount(message: AmqpMessage): number {
  const headers = message.properties.headers ?? {};
  const before = toInteger(headers[DELIVERIES_HEADER]) ?? 0;
  const redeliveries = message.fields.redelivered
    ? Math.max(toInteger(headers['x-delivery-count']) ?? 1, 1)
    : 0;
  return before + redeliveries + 1;
}

// What a header value decoded by amqplib is, for the error that refuses it as a key: typed values come as
// `{ '!': type, value }`, tables as plain objects.
function amqpType(value: unknown): string {
  if (Array.isArray(value)) return 'array';
  if (typeof value === 'object' && value !== null) {
    const type = (value as { '!'?: unknown })['!'];
    return typeof type === 'string' ? type : 'table';
  }
  return typeof value;
}

/**
 * The default key: the AMQP `message-id` property, else the `x-idempotency-key` header (text, bytes read
 * as UTF-8, or an integer up to 2^53 − 1).
 * @throws TypeError when the header holds a larger integer or a fraction (amqplib reads a 64-bit integer
 *   inexactly), or another AMQP type (a timestamp, a decimal, a table, an array, a boolean): the message
 *   is dead-lettered as `invalid_key` with it. Before, `String()` made one key of several messages (two
 *   neighbouring 64-bit ids, every table as `[object Object]`): all but the first were acked as
 *   duplicates without running.
 */
export function defaultAmqpKey(message: AmqpMessage): string | undefined {
  const id = message.properties.messageId;
  if (typeof id === 'string' && id !== '') return id;
  const header = message.properties.headers?.[KEY_HEADER];
  if (header === undefined || header === null) return undefined;
  if (typeof header === 'string') return header;
  if (Buffer.isBuffer(header)) return header.toString('utf8');
  if (typeof header === 'number') {
    if (Number.isSafeInteger(header)) return String(header);
    // amqplib reads an AMQP long (a Java `long`, a snowflake id) into a JavaScript number, exact only up
    // to 2^53: neighbouring ids come out as one number, so one key. A fraction is no better an identity.
    throw new TypeError(
      `The ${KEY_HEADER} header is the number ${String(header)}, beyond 2^53 or not an integer: ` +
        'amqplib cannot read it exactly, so it cannot tell this message from another one; send the key ' +
        'as a string (or in the message-id property)',
    );
  }
  throw new TypeError(
    `The ${KEY_HEADER} header is an AMQP ${amqpType(header)}, not text: it cannot tell this message ` +
      'from another one; send the key as a string (or in the message-id property)',
  );
}

/**
 * Publish options for a copy of `message`: its properties and headers, the exchange and routing key it
 * was published with (`routing.ts`), plus `extra` headers, always persistent
 * (delivery mode 2). Its `user-id` goes into {@link USER_ID_HEADER} instead:
 * RabbitMQ validates the property against the consumer's own user, and closed the consumer's channel at
 * every retry or dead letter of a message another user published with it, which then came back and ran
 * again, without end.
 */
export function copyOptions(
  message: AmqpMessage,
  extra: Record<string, unknown>,
): AmqpPublishOptions {
  const headers: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(message.properties.headers ?? {})) {
    if (!BROKER_HEADERS.test(name) && !COPY_HEADERS.has(name) && !ROUTING_HEADERS.has(name)) {
      headers[name] = value;
    }
  }
  const options: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(message.properties)) {
    // `expiration` belongs to the copy, `headers` is rebuilt; amqplib reports absent properties as undefined.
    if (value !== undefined && !OWN_PROPERTIES.has(name)) options[name] = value;
  }
  const { userId } = message.properties;
  if (typeof userId === 'string' && userId !== '') headers[USER_ID_HEADER] = userId;
  return {
    ...options,
    deliveryMode: PERSISTENT_DELIVERY_MODE,
    headers: { ...headers, ...routingHeaders(message), ...extra },
  };
}

/**
 * The identity of `message` across its redeliveries, if it has one: the {@link DELIVERY_ID_HEADER} of a
 * retry copy. The application's own message has none (RabbitMQ gives none: delivery tags are per channel,
 * and its message id is the idempotency key, which a deliberate re-publish shares).
 */
export function deliveryId(message: AmqpMessage): string | undefined {
  const value = message.properties.headers?.[DELIVERY_ID_HEADER];
  const id = Buffer.isBuffer(value) ? value.toString('utf8') : value;
  return typeof id === 'string' && id !== '' ? id : undefined;
}

/**
 * Publish options of a retry copy of `message`: our delivery counter, the copy's identity, the delay as
 * its TTL, and the dead letter it carries when the dead-letter queue failed (see `pending-letter.ts`).
 */
export function retryOptions(
  message: AmqpMessage,
  deliveryCount: number,
  delayMs: number,
  letter: DeadLetter | undefined,
): AmqpPublishOptions {
  const extra: Record<string, unknown> = {
    [DELIVERIES_HEADER]: deliveryCount,
    [DELIVERY_ID_HEADER]: newCopyId(),
  };
  if (letter !== undefined) extra[PENDING_DEAD_LETTER_HEADER] = pendingLetterHeader(letter);
  // The TTL is a string of whole milliseconds; the retry queue dead-letters the copy back when it expires.
  return { ...copyOptions(message, extra), expiration: String(Math.ceil(delayMs)) };
}

// The headers a dead letter adds, never left out to make room (header-room.ts).
const DEAD_LETTER_HEADERS = [
  DEAD_LETTER_DELIVERIES_HEADER,
  DEAD_LETTER_REASON_HEADER,
  ERROR_HEADER,
  CONSUMER_HEADER,
  FAILED_AT_HEADER,
];

/**
 * Whether a {@link KEY_HEADER} value can be the message's key (defaultAmqpKey reads it when there is no
 * message id): a replay of the dead letter needs it to run under the same key, so it is never left out to
 * make room. A longer one is no key (refused), and may be what fills the table.
 */
function mayBeKey(value: unknown): boolean {
  if (typeof value === 'number') return true;
  // A key's characters take at most 3 bytes each in UTF-8 (a surrogate pair, two characters, 4).
  if (typeof value === 'string' || Buffer.isBuffer(value)) {
    return Buffer.byteLength(value) <= 3 * MAX_KEY_LENGTH;
  }
  return false;
}

/**
 * Publish options of the dead letter of `message`: the error recorded in headers. The delivery count goes
 * under {@link DEAD_LETTER_DELIVERIES_HEADER}, not the counting header: replaying the dead letter to the
 * queue (same headers) runs the handler again with its full `maxDeliveries`. Its header table fits
 * amqplib's 64 KB (header-room.ts): the message's largest headers are left out if need be, named in
 * `x-idempotency-omitted-headers`, never its key's (see {@link mayBeKey}).
 */
export function deadLetterOptions(message: AmqpMessage, letter: DeadLetter): AmqpPublishOptions {
  const options = copyOptions(message, {
    [DEAD_LETTER_DELIVERIES_HEADER]: letter.deliveryCount,
    [DEAD_LETTER_REASON_HEADER]: letter.reason,
    [ERROR_HEADER]: JSON.stringify(letter.error),
    [CONSUMER_HEADER]: letter.consumer,
    [FAILED_AT_HEADER]: letter.failedAt,
  });
  if (options.headers !== undefined) {
    delete options.headers[DELIVERIES_HEADER];
    // The message's own headers (not ours, written over them) may leave no room for ours: header-room.ts.
    const own = new Set(Object.keys(message.properties.headers ?? {}));
    for (const name of Object.keys(routingHeaders(message))) own.delete(name);
    for (const name of DEAD_LETTER_HEADERS) own.delete(name);
    if (typeof message.properties.userId === 'string') own.delete(USER_ID_HEADER);
    if (mayBeKey(message.properties.headers?.[KEY_HEADER])) own.delete(KEY_HEADER);
    options.headers = fitHeaders(options.headers, own);
  }
  return options;
}
