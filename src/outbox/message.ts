/**
 * The outbox message: what a caller enqueues, what a publisher receives, and how a payload is stored as
 * bytes plus a content type.
 * @module
 */
import { randomUUID } from 'node:crypto';
import { InvalidOptionsError } from '../core/errors.js';
import { textFlaw } from '../core/text-flaw.js';
import { checkMessageId } from './message-id.js';

/** What {@link enqueue} takes: one event to publish once the caller's transaction commits. */
export interface EnqueueMessage {
  /** Where the message goes: the RabbitMQ routing key, the NATS subject or the Redis stream, by default. */
  topic: string;
  /** An optional business key (the aggregate id, a partition key), passed on to the publisher. */
  key?: string | null;
  /**
   * The body. Bytes (a `Uint8Array`/`Buffer`, any other `ArrayBuffer` view, or an `ArrayBuffer`) are stored as
   * is (`application/octet-stream`), a string as UTF-8 (`text/plain; charset=utf-8`), anything else as JSON
   * (`application/json`; a `Map` or `Set` is refused, JSON would make it `{}`).
   */
  payload: unknown;
  /** String headers published with the message. */
  headers?: Record<string, string>;
  /**
   * The stable message id, e.g. `ctx.downstreamKey('payment.initiated')`. Every publish of this row
   * carries it, so broker-side dedup and idempotent consumers recognise re-sends. 1–255 printable ASCII
   * characters, the key rule of every consumer of this package (anything else is refused).
   * Enqueueing the same id twice with the same topic and payload is a no-op that returns the first row;
   * with a different topic or payload it throws `InvalidOptionsError`.
   * @default a random UUID
   */
  messageId?: string;
  /** Overrides the content type derived from the payload. */
  contentType?: string;
}

/** What {@link enqueue} returns. */
export interface EnqueueResult {
  /** The stable message id every publish of this message carries. */
  messageId: string;
  /** The outbox row's id (insertion order, as a decimal string). */
  rowId: string;
  /** True when a row with this `messageId` already existed (same topic and payload): nothing was added. */
  duplicate: boolean;
}

/** A claimed outbox row, as a {@link Publisher} receives it. */
export interface OutboxMessage {
  /** The stable message id: publish it as the broker's message id (AMQP `messageId`, `Nats-Msg-Id`, …). */
  id: string;
  /** The topic given to `enqueue`. */
  topic: string;
  /** The business key given to `enqueue`, or `null`. */
  key: string | null;
  /** The body as bytes; {@link decodePayload} turns it back into what was enqueued. */
  payload: Uint8Array;
  /** `application/json`, `text/plain; charset=utf-8`, `application/octet-stream` or the caller's own. */
  contentType: string;
  /** The headers given to `enqueue`. */
  headers: Record<string, string>;
  /**
   * The outbox row's id: a 64-bit integer as a decimal string. Compare or convert it with `BigInt`, not
   * `Number`, which rounds ids past 2^53 onto their neighbours'.
   */
  rowId: string;
  /** Publish attempts started for this row, this one included (1 on the first try). */
  attempt: number;
  /** When the row was enqueued (epoch ms). */
  createdAt: number;
}

/** Content types the outbox derives from a payload. */
export const ContentType = {
  Json: 'application/json',
  Text: 'text/plain; charset=utf-8',
  Binary: 'application/octet-stream',
} as const;

/** A payload as it is stored. */
export interface EncodedPayload {
  /** The bytes. */
  bytes: Buffer;
  /** Their content type. */
  contentType: string;
}

/**
 * Encode a payload for storage: bytes as is, a string as UTF-8, anything else as JSON.
 * @throws InvalidOptionsError when the payload cannot be serialised as JSON (undefined, a function, a cycle,
 * a `Map` or `Set`).
 */
export function encodePayload(payload: unknown, contentType?: string): EncodedPayload {
  // Any view (Uint8Array, Buffer, DataView, Float64Array, …) and a bare ArrayBuffer are bytes: JSON would
  // turn them into "{}" or an object of indices, publishing something other than what was enqueued.
  if (ArrayBuffer.isView(payload)) {
    return {
      bytes: Buffer.from(payload.buffer, payload.byteOffset, payload.byteLength),
      contentType: contentType ?? ContentType.Binary,
    };
  }
  if (payload instanceof ArrayBuffer || payload instanceof SharedArrayBuffer) {
    return { bytes: Buffer.from(payload), contentType: contentType ?? ContentType.Binary };
  }
  if (payload instanceof Map || payload instanceof Set) {
    throw new InvalidOptionsError(
      'enqueue: a Map or Set payload would be stored as "{}"; convert it (Object.fromEntries, [...set])',
    );
  }
  if (typeof payload === 'string') {
    return { bytes: Buffer.from(payload, 'utf8'), contentType: contentType ?? ContentType.Text };
  }
  let json: string | undefined;
  try {
    json = JSON.stringify(payload);
  } catch (error) {
    throw new InvalidOptionsError(`enqueue: payload is not JSON-serialisable: ${String(error)}`, {
      cause: error,
    });
  }
  if (json === undefined) {
    throw new InvalidOptionsError(
      'enqueue: payload is not JSON-serialisable (undefined or a function)',
    );
  }
  return { bytes: Buffer.from(json, 'utf8'), contentType: contentType ?? ContentType.Json };
}

/**
 * Turn a message's payload back into what was enqueued: parsed JSON for `application/json`, a string for
 * `text/*`, the bytes otherwise.
 * @example
 * bus.subscribe('payment.initiated', (message) => {
 *   const payment = decodePayload(message) as { paymentId: string };
 * });
 */
export function decodePayload(message: Pick<OutboxMessage, 'payload' | 'contentType'>): unknown {
  const type = message.contentType.split(';')[0]?.trim().toLowerCase() ?? '';
  const text = () => Buffer.from(message.payload).toString('utf8');
  if (type === 'application/json' || type.endsWith('+json')) return JSON.parse(text());
  if (type.startsWith('text/')) return text();
  return message.payload;
}

/** An enqueue request after validation, ready to insert. */
export interface PreparedMessage {
  messageId: string;
  topic: string;
  key: string | null;
  payload: Buffer;
  contentType: string;
  headers: string;
}

// A NUL would fail the insert as "store unavailable"; a lone surrogate is stored as U+FFFD in a text
// column, so a retried enqueue of the same message no longer matches its own row ("already enqueued with a
// different … key"), and in the jsonb headers PostgreSQL refuses it (22P02). What a broker refuses beyond
// that (NATS: header names that are not tokens, CR/LF in header values) is its publisher's to say: RabbitMQ
// and Redis Streams carry such headers as they are.
function checkText(field: string, value: string): void {
  const flaw = textFlaw(value);
  if (flaw === 'nul') {
    throw new InvalidOptionsError(`enqueue: ${field} must not contain a NUL character`);
  }
  if (flaw === 'lone-surrogate') {
    throw new InvalidOptionsError(
      `enqueue: ${field} must be well-formed Unicode: it contains a lone surrogate (half of a character ` +
        'such as an emoji, often from cutting a string by length), which cannot be stored as UTF-8',
    );
  }
}

/**
 * Validate an {@link EnqueueMessage} and encode its payload and headers.
 * @throws InvalidOptionsError on an empty topic, a message id that is not 1–255 printable ASCII characters
 * (`message-id.ts`), a header without a string value, a NUL or a lone surrogate in a text field
 * (PostgreSQL cannot store the one, UTF-8 the other), or a payload that cannot be encoded.
 */
export function prepareMessage(message: EnqueueMessage): PreparedMessage {
  if (message === null || typeof message !== 'object') {
    throw new InvalidOptionsError('enqueue: expected a message { topic, payload }');
  }
  if (typeof message.topic !== 'string' || message.topic.length === 0) {
    throw new InvalidOptionsError('enqueue: topic must be a non-empty string');
  }
  checkText('topic', message.topic);
  const key = message.key ?? null;
  if (key !== null && typeof key !== 'string') {
    throw new InvalidOptionsError('enqueue: key must be a string or null');
  }
  if (key !== null) checkText('key', key);
  const messageId = message.messageId ?? randomUUID();
  // A NUL or a lone surrogate is named as in every other text field, before the key rule refuses it too.
  if (typeof messageId === 'string') checkText('messageId', messageId);
  checkMessageId(messageId);
  const headers = message.headers ?? {};
  // A string or an array would pass Object.entries as an object of indices, and be dropped at the relay.
  if (typeof headers !== 'object' || Array.isArray(headers)) {
    throw new InvalidOptionsError('enqueue: headers must be an object of string values');
  }
  for (const [name, value] of Object.entries(headers)) {
    checkText('a header name', name);
    if (typeof value !== 'string') {
      throw new InvalidOptionsError(`enqueue: header ${JSON.stringify(name)} must be a string`);
    }
    checkText(`header ${JSON.stringify(name)}`, value);
  }
  if (
    message.contentType !== undefined &&
    (typeof message.contentType !== 'string' || message.contentType.length === 0)
  ) {
    throw new InvalidOptionsError('enqueue: contentType must be a non-empty string');
  }
  if (message.contentType !== undefined) checkText('contentType', message.contentType);
  const { bytes, contentType } = encodePayload(message.payload, message.contentType);
  return {
    messageId,
    topic: message.topic,
    key,
    payload: bytes,
    contentType,
    headers: JSON.stringify(headers),
  };
}

/** Parse stored headers (JSON text in SQLite, already an object from a PostgreSQL jsonb column). */
export function parseHeaders(value: unknown): Record<string, string> {
  const parsed = typeof value === 'string' ? (JSON.parse(value) as unknown) : value;
  if (parsed === null || typeof parsed !== 'object') return {};
  return parsed as Record<string, string>;
}
