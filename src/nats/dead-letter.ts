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
 * 64 KiB of headers JetStream stores), comma-separated; bounded as the values this adapter adds, those
 * past the bound counted at the end (`a,b,+4998 more`, see {@link namesWithin}).
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

/**
 * A percent-encoded (so ASCII) `value` cut to `maxBytes` so that it still decodes: no `%XX` split, nor
 * the `%XX` groups of one character's UTF-8 (`é` is `%C3%A9`): `decodeURIComponent` throws on a
 * sequence cut short (`…%C3`), as on a split group.
 */
export function cutEncoded(value: string, maxBytes: number): string {
  let end = Math.min(value.length, maxBytes);
  const percent = value.lastIndexOf('%', end - 1);
  if (percent >= 0 && percent > end - 3) end = percent;
  // Back over the trailing continuation bytes (%80–%BF) to the character's lead byte: kept only if the
  // groups after it are all its sequence takes.
  let start = end;
  while (start >= 3 && value[start - 3] === '%' && /^[89AB]$/i.test(value[start - 2] as string)) {
    start -= 3;
  }
  if (start >= 3 && value[start - 3] === '%') {
    const lead = Number.parseInt(value.slice(start - 2, start), 16);
    const length = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 1;
    if (length > 1 && (end - start) / 3 + 1 < length) end = start - 3;
  }
  return value.slice(0, end);
}

/** Headers this adapter creates (`headers()` of the NATS client), which can also take a second value. */
type WritableHeaders = NatsHeaders & { append(key: string, value: string): void };

/** A letter's headers before they are handed to the client: each name's values, in order. */
type Entries = Map<string, string[]>;

/**
 * Whether the NATS client takes `name` as a header name: printable ASCII but the colon (its
 * `canonicalMIMEHeaderKey`, which `append` calls and which throws on any other).
 */
function validName(name: string): boolean {
  return name !== '' && /^[!-9;-~]+$/.test(name);
}

/**
 * Headers being written, with a record of every value that had to be changed to be written at all. Built
 * as {@link Entries}, checked here as the client's `append` checks them, not in the client's headers:
 * their `append` looks through every name already set, so building 5000 headers there took 150 ms, and
 * a letter fitted to `max_payload` is built several times.
 */
class SafeHeaders {
  readonly entries: Entries = new Map();
  private readonly encoded = new Set<string>();
  private readonly truncated = new Set<string>();
  private readonly omitted = new Set<string>();

  constructor(private readonly maxValueBytes = MAX_HEADER_VALUE_BYTES) {}

  /** Copy a header value of the original message as it is, or record that it could not be. */
  copy(name: string, value: string): void {
    // Decoded from the wire, so normally valid; a hand-built message may still carry a name NATS refuses.
    if (!validName(name) || /[\r\n]/.test(value)) {
      this.omitted.add(name);
      return;
    }
    // A header may carry several values; the client trims each, as its `append` does.
    const values = this.entries.get(name);
    if (values === undefined) this.entries.set(name, [value.trim()]);
    else values.push(value.trim());
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
    this.entries.set(name, [safe]);
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
  finish(): Entries {
    const lists = [
      [ENCODED_HEADERS, this.encoded],
      [TRUNCATED_HEADERS, this.truncated],
      [OMITTED_HEADERS, this.omitted],
    ] as const;
    for (const [header, names] of lists) {
      if (names.size > 0) this.entries.set(header, [namesWithin([...names], this.maxValueBytes)]);
    }
    return this.entries;
  }
}

/**
 * `names` comma-separated, within `maxBytes`: past it, the names that fit whole, then `+N more` (a space
 * is in no header name, so it reads as none). Bounded as every value this adapter adds: a message of
 * thousands of headers left out must not need as many bytes again to name them, or leaving one out would
 * save next to nothing (its line, less its name in the list).
 */
export function namesWithin(names: readonly string[], maxBytes: number): string {
  const all = names.join(',');
  if (Buffer.byteLength(all) <= maxBytes) return all;
  // Room for the longest suffix: its count only shrinks as more names are listed.
  const room = maxBytes - Buffer.byteLength(`,+${names.length} more`);
  let bytes = 0;
  let listed = 0;
  for (const name of names) {
    const next = bytes + (listed > 0 ? 1 : 0) + Buffer.byteLength(name);
    if (next > room) break;
    bytes = next;
    listed++;
  }
  const more = `+${names.length - listed} more`;
  return listed === 0 ? more : `${names.slice(0, listed).join(',')},${more}`;
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
export function headersBytes(headers: Iterable<[string, readonly string[]]>): number {
  let bytes = 'NATS/1.0\r\n\r\n'.length;
  for (const [name, values] of headers) {
    for (const value of values) bytes += 4 + Buffer.byteLength(name) + Buffer.byteLength(value);
  }
  return bytes;
}

/**
 * `entries` written into `target`, the client's fresh headers: straight into its map of them when it
 * has one (`MsgHdrsImpl.headers`, public in the client's types), in one pass; else a value at a time, with
 * `append`, which looks through every name already set (quadratic: 150 ms for 5000 headers).
 */
function written(target: WritableHeaders, entries: Entries): NatsHeaders {
  const own = (target as { headers?: unknown }).headers;
  if (own instanceof Map && own.size === 0) {
    for (const [name, values] of entries) own.set(name, [...values]);
    return target;
  }
  for (const [name, values] of entries) for (const value of values) target.append(name, value);
  return target;
}

/**
 * The headers of the dead-letter copy of `message`, written into `headers` (the client's, fresh).
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
  return written(headers, letterEntries(message, letter, leftOut, maxValueBytes));
}

/**
 * The headers a dead letter sets from the letter and the message (besides {@link KEY_HEADER} and the lists
 * of changed headers), written by {@link letterEntries}: a message's header of the same name is replaced,
 * not carried (`ADDED_HEADERS`).
 */
const LETTER_HEADERS = {
  reason: 'x-idempotency-dead-letter-reason',
  error: 'x-idempotency-error',
  deliveries: 'x-idempotency-deliveries',
  consumer: 'x-idempotency-consumer',
  failedAt: 'x-idempotency-failed-at',
  subject: 'x-idempotency-subject',
  streamSequence: 'x-idempotency-stream-sequence',
} as const;

/** The headers of the dead-letter copy of `message`, as {@link deadLetterHeaders} writes them. */
function letterEntries(
  message: NatsJsMsg,
  letter: DeadLetter,
  leftOut: ReadonlySet<string>,
  maxValueBytes: number,
): Entries {
  const safe = new SafeHeaders(maxValueBytes);
  for (const [name, values] of message.headers ?? []) {
    // Nats-Msg-Id would make the DLQ stream drop a second dead letter of the same key as a duplicate.
    if (name === MSG_ID_HEADER) continue;
    if (leftOut.has(name)) safe.leaveOut(name);
    else for (const value of values) safe.copy(name, value);
  }
  safe.add(LETTER_HEADERS.reason, letter.reason);
  safe.addError(LETTER_HEADERS.error, letter.error);
  safe.add(LETTER_HEADERS.deliveries, String(letter.deliveryCount));
  safe.add(LETTER_HEADERS.consumer, letter.consumer);
  safe.add(LETTER_HEADERS.failedAt, letter.failedAt);
  safe.add(LETTER_HEADERS.subject, message.subject);
  safe.add(LETTER_HEADERS.streamSequence, String(message.info.streamSequence));
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
 * {@link COMPACT_HEADER_VALUE_BYTES}, (3) those, and the fewest of the message's headers, the largest
 * first, that cover what is missing, named in {@link OMITTED_HEADERS}. The payload is never cut. Before,
 * the copy was refused whole at every try: the message, redelivered after each `maxRetryDelay` to write
 * its letter again, was never dead-lettered (or dropped unwritten by the server at its `max_deliver`).
 *
 * At most four builds of the headers, each linear in their number, and one write into the client's: the
 * headers to leave out are chosen from each one's saving, sorted once. Before, they were left out one at a
 * time, every header built again (in the client's headers) each time: 5000 one-byte headers and a payload
 * filling `max_payload` blocked the event loop 15–22 s, `working()` stopped, and the server redelivered
 * that message (its letter written twice) and others (their handlers run twice).
 * @returns The first headers that fit; the last tried (all of the message's left out) if none does.
 */
export function fittedDeadLetterHeaders(
  newHeaders: () => WritableHeaders,
  message: NatsJsMsg,
  letter: DeadLetter,
  budget = MAX_HEADERS_BYTES,
): NatsHeaders {
  const full = letterEntries(message, letter, new Set(), MAX_HEADER_VALUE_BYTES);
  if (headersBytes(full) <= budget) return written(newHeaders(), full);
  const compact = (leftOut: ReadonlySet<string>) =>
    letterEntries(message, letter, leftOut, COMPACT_HEADER_VALUE_BYTES);
  const cut = compact(new Set());
  const missing = headersBytes(cut) - budget;
  if (missing <= 0) return written(newHeaders(), cut);
  const candidates = savings(message, letter);
  // The list's own line, the first time a name is left out (a bound: it may be there already).
  let needed = missing + 4 + OMITTED_HEADERS.length;
  const leftOut = new Set<string>();
  for (const { name, saving } of candidates) {
    if (needed <= 0) break;
    leftOut.add(name);
    needed -= saving;
  }
  if (leftOut.size < candidates.length) {
    const fitted = compact(leftOut);
    if (headersBytes(fitted) <= budget) return written(newHeaders(), fitted);
  }
  // Only a header NATS refuses (left out already, so its leaving saves nothing) makes the count short.
  return written(newHeaders(), compact(new Set(candidates.map(({ name }) => name))));
}

/**
 * Headers a dead letter sets itself (and {@link KEY_HEADER} when it has a key): one of the message's of
 * the same name is replaced, not carried, so leaving it out saves nothing.
 */
const ADDED_HEADERS: ReadonlySet<string> = new Set([
  MSG_ID_HEADER,
  ENCODED_HEADERS,
  TRUNCATED_HEADERS,
  OMITTED_HEADERS,
  ...Object.values(LETTER_HEADERS),
]);

/**
 * The message's headers a letter may leave out, each with the bytes leaving it out saves at least (its
 * lines, less its name and comma in {@link OMITTED_HEADERS}: a list cut to its bound is shorter still),
 * the largest saving first.
 */
function savings(message: NatsJsMsg, letter: DeadLetter): Array<{ name: string; saving: number }> {
  const candidates: Array<{ name: string; saving: number }> = [];
  for (const [name, values] of message.headers ?? []) {
    if (ADDED_HEADERS.has(name) || (name === KEY_HEADER && letter.key !== undefined)) continue;
    const nameBytes = Buffer.byteLength(name);
    let lines = 0;
    for (const value of values) lines += 4 + nameBytes + Buffer.byteLength(value);
    candidates.push({ name, saving: lines - nameBytes - 1 });
  }
  return candidates.sort((a, b) => b.saving - a.saving);
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
