/**
 * The dead-letter copy of a JetStream message: its payload and headers plus the error, published to the DLQ
 * subject. NATS refuses a header value containing CR or LF (and trims surrounding whitespace), and a
 * message that no longer fits `max_payload` is refused whole, so the values this adapter adds are encoded
 * or cut to fit, and the copy says which: a message whose key is invalid because of a newline must still
 * be dead-lettered, not redelivered forever. So must one whose payload nearly fills `max_payload`: the
 * copy's headers are fitted to what the payload leaves of it (its values cut short, then the message's
 * largest headers left out), the payload kept whole.
 * @module
 */
import type { DeadLetter } from '../consumer/index.js';
import type { NatsHeaders, NatsJsMsg, NatsPublisher } from './nats-types.js';

/** The default key header of NATS: the publisher's dedup id. */
export const MSG_ID_HEADER = 'Nats-Msg-Id';
/** The fallback key header, and the one the dead letter records the key in. */
export const KEY_HEADER = 'x-idempotency-key';
/** Headers whose value was percent-encoded (`encodeURIComponent`), comma-separated. */
export const ENCODED_HEADERS = 'x-idempotency-encoded-headers';
/** Headers whose value was cut to {@link MAX_HEADER_VALUE_BYTES}, comma-separated. */
export const TRUNCATED_HEADERS = 'x-idempotency-truncated-headers';
/**
 * Headers of the original message the copy could not carry (refused by NATS, or left out to fit the
 * 64 KiB of headers JetStream stores), comma-separated.
 */
export const OMITTED_HEADERS = 'x-idempotency-omitted-headers';
/**
 * Longest value, in UTF-8 bytes, of a header this adapter adds to a dead letter (and of the `term()`
 * reason). An invalid key or an error message can be any size; a few KiB say what went wrong without
 * pushing the copy past the server's `max_payload`.
 */
export const MAX_HEADER_VALUE_BYTES = 4096;

/** `value` cut to at most `maxBytes` of UTF-8, on a character boundary. */
export function cutUtf8(value: string, maxBytes: number): string {
  if (Buffer.byteLength(value) <= maxBytes) return value;
  let bytes = 0;
  let end = 0;
  for (const char of value) {
    bytes += Buffer.byteLength(char);
    if (bytes > maxBytes) break;
    end += char.length;
  }
  return value.slice(0, end);
}

/** A percent-encoded (so ASCII) `value` cut to `maxBytes` without splitting a `%XX`: it still decodes. */
function cutEncoded(value: string, maxBytes: number): string {
  const cut = value.slice(0, maxBytes);
  const percent = cut.lastIndexOf('%');
  return percent >= 0 && percent > cut.length - 3 ? cut.slice(0, percent) : cut;
}

/** Headers this adapter creates (`headers()` of the NATS client), which can also take a second value. */
type WritableHeaders = NatsHeaders & { append(key: string, value: string): void };

/** Headers being written, with a record of every value that had to be changed to be written at all. */
class SafeHeaders {
  private readonly encoded = new Set<string>();
  private readonly truncated = new Set<string>();
  private readonly omitted = new Set<string>();

  constructor(
    readonly headers: WritableHeaders,
    private readonly maxValueBytes = MAX_HEADER_VALUE_BYTES,
  ) {}

  /** Copy a header value of the original message as it is, or record that it could not be. */
  copy(name: string, value: string): void {
    try {
      // append: a header may carry several values.
      this.headers.append(name, value);
    } catch {
      // Decoded from the wire, so normally valid; a hand-built message may still carry a name NATS refuses.
      this.omitted.add(name);
    }
  }

  /** Leave a header of the original message out, to fit the copy's headers in 64 KiB; recorded. */
  leaveOut(name: string): void {
    this.omitted.add(name);
  }

  /** Set a value this adapter adds: encoded if NATS would refuse or alter it, cut if too long. */
  add(name: string, value: string): void {
    let safe = value;
    if (/[\r\n]/.test(safe) || safe !== safe.trim()) {
      safe = encodeURIComponent(safe);
      this.encoded.add(name);
    }
    if (Buffer.byteLength(safe) > this.maxValueBytes) {
      safe =
        safe === value ? cutUtf8(safe, this.maxValueBytes) : cutEncoded(safe, this.maxValueBytes);
      this.truncated.add(name);
    }
    this.headers.set(name, safe);
  }

  /** Set the error as JSON, cutting its message (not the JSON) so that it still parses. */
  addError(name: string, error: DeadLetter['error']): void {
    let json = JSON.stringify(error);
    // JSON escaping can grow a string up to six times: halve the message until the whole fits. A name or
    // code too long by itself is left for add() to cut.
    let keep = this.maxValueBytes;
    while (Buffer.byteLength(json) > this.maxValueBytes && keep > 0) {
      keep = Math.floor(keep / 2);
      json = JSON.stringify({ ...error, message: `${cutUtf8(error.message, keep)}…` });
      this.truncated.add(name);
    }
    this.add(name, json);
  }

  /** Record what was changed, so a reader of the dead letter knows how to read it back. */
  finish(): NatsHeaders {
    const lists = [
      [ENCODED_HEADERS, this.encoded],
      [TRUNCATED_HEADERS, this.truncated],
      [OMITTED_HEADERS, this.omitted],
    ] as const;
    for (const [header, names] of lists) {
      if (names.size > 0) this.headers.set(header, [...names].join(','));
    }
    return this.headers;
  }
}

type HeadersFactory = () => WritableHeaders;
let headersFactory: Promise<HeadersFactory> | undefined;

// Loaded on the first dead letter only, so importing this adapter never loads the NATS client itself.
function loadHeaders(): Promise<HeadersFactory> {
  headersFactory ??= import('@nats-io/transport-node').then(
    (nats) => nats.headers as unknown as HeadersFactory,
  );
  return headersFactory;
}

/**
 * Most bytes of headers JetStream stores with a message: past it the publish is refused ("header size
 * exceeds maximum allowed of 64k"), however small the payload.
 */
export const MAX_HEADERS_BYTES = 65_535;

/** The bytes `headers` take on the wire (`NATS/1.0`, a line per value, the blank line). */
export function headersBytes(headers: NatsHeaders): number {
  let bytes = 'NATS/1.0\r\n\r\n'.length;
  for (const [name, values] of headers) {
    for (const value of values) bytes += 4 + Buffer.byteLength(name) + Buffer.byteLength(value);
  }
  return bytes;
}

/**
 * The headers of the dead-letter copy of `message`.
 * @param leftOut - Headers of the message not copied, named in {@link OMITTED_HEADERS} (see
 *   {@link fittedDeadLetterHeaders}).
 * @param maxValueBytes - Longest value this adapter adds ({@link MAX_HEADER_VALUE_BYTES}, or
 *   {@link COMPACT_HEADER_VALUE_BYTES} for a letter short of room).
 */
export function deadLetterHeaders(
  headers: WritableHeaders,
  message: NatsJsMsg,
  letter: DeadLetter,
  leftOut: ReadonlySet<string> = new Set(),
  maxValueBytes = MAX_HEADER_VALUE_BYTES,
): NatsHeaders {
  const safe = new SafeHeaders(headers, maxValueBytes);
  for (const [name, values] of message.headers ?? []) {
    // Nats-Msg-Id would make the DLQ stream drop a second dead letter of the same key as a duplicate.
    if (name === MSG_ID_HEADER) continue;
    if (leftOut.has(name)) safe.leaveOut(name);
    else for (const value of values) safe.copy(name, value);
  }
  safe.add('x-idempotency-dead-letter-reason', letter.reason);
  safe.addError('x-idempotency-error', letter.error);
  safe.add('x-idempotency-deliveries', String(letter.deliveryCount));
  safe.add('x-idempotency-consumer', letter.consumer);
  safe.add('x-idempotency-failed-at', letter.failedAt);
  safe.add('x-idempotency-subject', message.subject);
  safe.add('x-idempotency-stream-sequence', String(message.info.streamSequence));
  if (letter.key !== undefined) safe.add(KEY_HEADER, letter.key);
  return safe.finish();
}

/**
 * Longest value this adapter adds to a letter short of room (see {@link fittedDeadLetterHeaders}): the
 * error's message cut to a few hundred bytes still says what failed.
 */
export const COMPACT_HEADER_VALUE_BYTES = 256;

/**
 * The headers of the dead-letter copy of `message`, within `budget` bytes: {@link MAX_HEADERS_BYTES}, or
 * less when the payload leaves less of the server's `max_payload` (the copy, headers and payload, must fit
 * it). The message's own headers (up to 64 KiB themselves) may leave no room for the ones this adapter
 * adds: tried in turn, (1) every header, (2) the values this adapter adds cut to
 * {@link COMPACT_HEADER_VALUE_BYTES}, (3) those, and the message's largest headers left out one at a time,
 * named in {@link OMITTED_HEADERS}. The payload is never cut. Before, the copy was refused whole at every
 * try: the message, redelivered after each `maxRetryDelay` to write its letter again, was never
 * dead-lettered (or dropped unwritten by the server at its `max_deliver`).
 * @returns The first headers that fit; the last tried (all of the message's left out) if none does.
 */
export function fittedDeadLetterHeaders(
  newHeaders: () => WritableHeaders,
  message: NatsJsMsg,
  letter: DeadLetter,
  budget = MAX_HEADERS_BYTES,
): NatsHeaders {
  const full = deadLetterHeaders(newHeaders(), message, letter);
  if (headersBytes(full) <= budget) return full;
  const largestFirst = [...(message.headers ?? [])]
    .filter(([name]) => name !== MSG_ID_HEADER)
    .map(([name, values]) => ({
      name,
      bytes: values.reduce((sum, value) => sum + Buffer.byteLength(value), 0),
    }))
    .sort((a, b) => b.bytes - a.bytes);
  const leftOut = new Set<string>();
  for (;;) {
    const headers = deadLetterHeaders(
      newHeaders(),
      message,
      letter,
      leftOut,
      COMPACT_HEADER_VALUE_BYTES,
    );
    const next = largestFirst[leftOut.size];
    if (next === undefined || headersBytes(headers) <= budget) return headers;
    leftOut.add(next.name);
  }
}

/**
 * A dead letter that cannot fit the server's `max_payload`: the message's payload leaves too little of
 * it for the fewest headers a letter carries. The message is kept and the letter tried again at each
 * redelivery (reported each time); only a larger `max_payload` lets it through.
 */
export class DeadLetterTooLargeError extends Error {
  override readonly name = 'DeadLetterTooLargeError';

  constructor(payloadBytes: number, headerBytes: number, maxPayload: number) {
    super(
      `the dead letter cannot fit the server's max_payload (${maxPayload} bytes): the payload takes ` +
        `${payloadBytes} bytes and the letter's headers, cut to the fewest, ${headerBytes}. The message ` +
        'is kept, its letter tried again at each redelivery: raise max_payload on the server',
    );
  }
}

/** The `max_payload` of the publisher's connection (`jetstream(nc)` keeps it as `nc`), if it says. */
function maxPayloadOf(publisher: NatsPublisher): number | undefined {
  const limit = (publisher as { nc?: { info?: { max_payload?: unknown } } }).nc?.info?.max_payload;
  return typeof limit === 'number' && limit > 0 ? limit : undefined;
}

/**
 * Publish the dead-letter copy of `message` to `subject`, awaiting the PubAck, its headers fitted to the
 * publisher's `max_payload` (when its connection says) and to the 64 KiB JetStream stores.
 * @throws DeadLetterTooLargeError when the payload leaves too little of `max_payload` for any letter.
 */
export async function publishDeadLetter(
  publisher: NatsPublisher,
  subject: string,
  message: NatsJsMsg,
  letter: DeadLetter,
): Promise<void> {
  // The client refuses a publish whose headers and payload together pass the server's max_payload: a
  // payload near it (the original fitted, with headers of its own) leaves less room for the letter's.
  const maxPayload = maxPayloadOf(publisher);
  const budget =
    maxPayload === undefined
      ? MAX_HEADERS_BYTES
      : Math.min(MAX_HEADERS_BYTES, maxPayload - message.data.length);
  const headers = fittedDeadLetterHeaders(await loadHeaders(), message, letter, budget);
  const bytes = headersBytes(headers);
  if (maxPayload !== undefined && bytes > budget && bytes <= MAX_HEADERS_BYTES) {
    throw new DeadLetterTooLargeError(message.data.length, bytes, maxPayload);
  }
  await publisher.publish(subject, message.data, { headers });
}

/** The `term()` reason: the error, bounded (servers ≥ 2.11 keep it in the advisory). */
export function termReason(letter: DeadLetter): string {
  return cutUtf8(
    `${letter.reason}: ${letter.error.name}: ${letter.error.message}`,
    MAX_HEADER_VALUE_BYTES,
  );
}
