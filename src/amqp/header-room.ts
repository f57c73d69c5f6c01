/**
 * Room in a dead letter's header table. amqplib encodes a header table in a 64 KB buffer and throws a
 * `RangeError` past it, before anything is sent; RabbitMQ takes tables up to its frame size (128 KB by
 * default), from other clients, and amqplib reads them. A message whose own headers fill most of 64 KB
 * (a poison message, a trace header gone wild) left no room for the error headers of its dead letter: the
 * dead letter failed, the retry copy carrying it failed the same way, and the message stayed unacked on
 * the channel, holding a prefetch slot until the channel closed, then came back and did the same, never
 * dead-lettered. Its dead letter now omits the message's largest headers until the table fits, and names
 * them in {@link OMITTED_HEADERS_HEADER}; the content is kept whole. A retry copy cannot leave headers
 * out: {@link fitsHeaderTable} tells beforehand that it cannot be made (`delivery.ts`).
 * @module
 */

/** On a dead letter: the message's headers left out so that the header table fits, comma-separated. */
export const OMITTED_HEADERS_HEADER = 'x-idempotency-omitted-headers';

/** amqplib's encoding buffer for a header table (`SCRATCH` in its `defs.js`): a table past it throws. */
export const MAX_HEADER_TABLE_BYTES = 65_536;

/** Longest list of omitted names written: the names of a huge table must not overflow it by themselves. */
const MAX_OMITTED_LIST_BYTES = 4096;

/** Room kept for the header added as the copy is published (`x-idempotency-copy-id`, returns.ts). */
const PUBLISH_HEADER_BYTES = 128;

/**
 * An upper bound of the bytes amqplib encodes `value` in as a field value (its type tag included). Larger
 * than the exact size for a few types (every number counts as 8 bytes), never smaller: a table it finds
 * to fit does fit.
 */
function fieldBytes(value: unknown): number {
  if (Buffer.isBuffer(value)) return 5 + value.length;
  if (typeof value === 'string') return 5 + Buffer.byteLength(value);
  if (Array.isArray(value)) {
    let bytes = 5;
    for (const item of value) bytes += fieldBytes(item);
    return bytes;
  }
  if (typeof value === 'object' && value !== null) {
    // A typed value, `{ '!': type, value }`: its value's bytes, or 9 for a number, a timestamp, a decimal.
    if (Object.hasOwn(value, '!')) {
      const inner = (value as { value?: unknown }).value;
      return Math.max(fieldBytes(inner), 9) + 1;
    }
    return 1 + tableBytes(value as Record<string, unknown>);
  }
  return 9;
}

/** An upper bound of the bytes amqplib encodes `table` in (see {@link fieldBytes}). */
export function tableBytes(table: Record<string, unknown>): number {
  let bytes = 4;
  for (const [name, value] of Object.entries(table)) {
    if (value !== undefined) bytes += 1 + Buffer.byteLength(name) + fieldBytes(value);
  }
  return bytes;
}

/**
 * Whether a copy with `headers` can be published: its header table, with the header added as it is
 * published, fits amqplib's 64 KB. Measured before publishing, not learnt from amqplib's `RangeError`:
 * a retry copy cannot leave headers out (the handler would run on another message), so one that does not
 * fit is not attempted (see `AmqpDelivery.canRetry`). An upper bound: a table within a few bytes of the
 * limit may be judged not to fit when it would.
 */
export function fitsHeaderTable(headers: Record<string, unknown>): boolean {
  return tableBytes(headers) <= MAX_HEADER_TABLE_BYTES - PUBLISH_HEADER_BYTES;
}

/**
 * `headers`, or, when they would not fit amqplib's header table, without the largest of the message's own
 * headers (`own`) until they do, the names left out listed in {@link OMITTED_HEADERS_HEADER}. The headers
 * not in `own` (the error, the reason, the routing: what the dead letter says) are always kept.
 */
export function fitHeaders(
  headers: Record<string, unknown>,
  own: ReadonlySet<string>,
): Record<string, unknown> {
  if (fitsHeaderTable(headers)) return headers;
  // Room kept for the list of omitted names itself.
  const room = MAX_HEADER_TABLE_BYTES - PUBLISH_HEADER_BYTES - (MAX_OMITTED_LIST_BYTES + 64);
  let bytes = tableBytes(headers);
  const largestFirst = Object.entries(headers)
    .filter(([name, value]) => own.has(name) && value !== undefined)
    .map(([name, value]) => ({ name, bytes: 1 + Buffer.byteLength(name) + fieldBytes(value) }))
    .sort((a, b) => b.bytes - a.bytes);
  const fitted = { ...headers };
  let list = '';
  for (const header of largestFirst) {
    if (bytes <= room) break;
    delete fitted[header.name];
    bytes -= header.bytes;
    // Every name listed is whole; past the list's room the rest go unlisted (names are at most 255 bytes).
    const listed = list === '' ? header.name : `${list},${header.name}`;
    if (Buffer.byteLength(listed) <= MAX_OMITTED_LIST_BYTES) list = listed;
  }
  fitted[OMITTED_HEADERS_HEADER] = list;
  return fitted;
}
