/**
 * One way to send a raw command through node-redis (`sendCommand`) or ioredis (`call`), and parsers for the
 * stream replies in both RESP2 (arrays) and RESP3 (maps) forms. Entries are read as bytes, so that a binary
 * field value (protobuf, msgpack) reaches the handler and the dead letter unchanged.
 * @module
 */
/** A command argument: text, or bytes (a dead letter's copy of a binary field value). */
export type CommandArgument = string | Buffer;

/** A connected node-redis (v4–v6) or ioredis client, typed by the methods each uses for raw commands. */
export type RedisStreamsClient =
  | {
      sendCommand(
        args: CommandArgument[],
        options?: { typeMapping?: Record<number, unknown> },
      ): Promise<unknown>;
    }
  | {
      call(command: string, ...args: CommandArgument[]): Promise<unknown>;
      callBuffer?(command: string, ...args: CommandArgument[]): Promise<unknown>;
    };

/** One stream entry, as handlers receive it. */
export interface StreamEntry {
  /** The stream's key. */
  stream: string;
  /** The entry id (`1700000000000-0`). */
  id: string;
  /**
   * The entry's fields, values decoded as UTF-8 text. A value that is not valid UTF-8 (binary data) is
   * altered by the decoding: read it from {@link StreamEntry.buffers}.
   */
  fields: Record<string, string>;
  /**
   * The entry's field values as stored, byte for byte (names decoded as UTF-8, as in `fields`). Needs
   * node-redis 5+ or ioredis; node-redis 4 replies with text, so there these are its UTF-8 bytes.
   */
  buffers: Record<string, Buffer>;
  /**
   * Set only when a field name occurs more than once in the entry (`XADD s * item a item b`, which Redis
   * keeps as is): every field in stored order, values as bytes. `fields` and `buffers` then hold the last
   * value of each name only; the dead letter copies these, all of them, and the default key extractor
   * refuses an entry whose `x-idempotency-key` occurs with two different values.
   */
  pairs?: Array<[name: string, value: Buffer]>;
}

/** True when `client` has a raw command method this adapter can use. */
export function isStreamsClient(client: unknown): client is RedisStreamsClient {
  if (typeof client !== 'object' || client === null) return false;
  const c = client as { call?: unknown; sendCommand?: unknown };
  return typeof c.call === 'function' || typeof c.sendCommand === 'function';
}

// node-redis's RESP_TYPES.BLOB_STRING: a bulk string reply, mapped to a Buffer instead of a string.
const BLOB_STRING = 36;
const AS_BUFFERS = { typeMapping: { [BLOB_STRING]: Buffer } };

/**
 * Send `args` as one command. With `asBuffers`, its bulk strings come back as Buffers (node-redis
 * `typeMapping`, ioredis `callBuffer`): for a reply carrying entries, whose values may be binary; the
 * parsers below take both forms.
 */
export function command(
  client: RedisStreamsClient,
  args: CommandArgument[],
  asBuffers = false,
): Promise<unknown> {
  // ioredis also has a `sendCommand`, taking a Command object, so look for its `call` first.
  if ('call' in client && typeof client.call === 'function') {
    const [name, ...rest] = args;
    if (asBuffers && typeof client.callBuffer === 'function') {
      return client.callBuffer(String(name), ...rest);
    }
    return client.call(String(name), ...rest);
  }
  if ('sendCommand' in client && typeof client.sendCommand === 'function') {
    // Merged over the client's own command options by node-redis: its timeout still applies.
    return asBuffers ? client.sendCommand(args, AS_BUFFERS) : client.sendCommand(args);
  }
  throw new TypeError('client: neither node-redis sendCommand nor ioredis call found');
}

/** Send `args` as one command whose bulk strings come back as Buffers ({@link command}). */
export const readCommand = (client: RedisStreamsClient, args: CommandArgument[]) =>
  command(client, args, true);

/** A reply element as text: a Buffer decoded as UTF-8, anything else as `String` writes it. */
export const text = (value: unknown): string =>
  Buffer.isBuffer(value) ? value.toString('utf8') : String(value);

const bytes = (value: unknown): Buffer =>
  Buffer.isBuffer(value) ? value : Buffer.from(String(value), 'utf8');

function defineField<T>(target: Record<string, T>, name: string, value: T): void {
  Object.defineProperty(target, name, {
    value,
    writable: true,
    enumerable: true,
    configurable: true,
  });
}

function toFields(raw: unknown): Pick<StreamEntry, 'fields' | 'buffers' | 'pairs'> | undefined {
  if (!Array.isArray(raw)) return undefined;
  const fields: Record<string, string> = {};
  const buffers: Record<string, Buffer> = {};
  let repeated = false;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = text(raw[i]);
    // Only looked for, not built: the pairs are made from `raw` once a name repeats, which is rare.
    if (!repeated && Object.hasOwn(buffers, name)) repeated = true;
    if (name === '__proto__') {
      // An assignment would set the object's prototype instead of adding the field.
      defineField(fields, name, text(raw[i + 1]));
      defineField(buffers, name, bytes(raw[i + 1]));
      continue;
    }
    fields[name] = text(raw[i + 1]);
    buffers[name] = bytes(raw[i + 1]);
  }
  if (!repeated) return { fields, buffers };
  const pairs: Array<[string, Buffer]> = [];
  for (let i = 0; i + 1 < raw.length; i += 2) pairs.push([text(raw[i]), bytes(raw[i + 1])]);
  return { fields, buffers, pairs };
}

/**
 * Entries of an `[[id, [field, value, …]], …]` list. Deleted entries (trimmed while pending) come back with
 * no fields; they are returned in `deleted` so the caller can acknowledge them.
 */
export function parseEntries(
  stream: string,
  raw: unknown,
): { entries: StreamEntry[]; deleted: string[] } {
  const entries: StreamEntry[] = [];
  const deleted: string[] = [];
  if (!Array.isArray(raw)) return { entries, deleted };
  for (const item of raw) {
    if (!Array.isArray(item)) continue;
    const id = text(item[0]);
    const parsed = toFields(item[1]);
    if (parsed === undefined) deleted.push(id);
    else if (parsed.pairs === undefined) {
      entries.push({ stream, id, fields: parsed.fields, buffers: parsed.buffers });
    } else {
      entries.push({
        stream,
        id,
        fields: parsed.fields,
        buffers: parsed.buffers,
        pairs: parsed.pairs,
      });
    }
  }
  return { entries, deleted };
}

/**
 * The entries of an `XREADGROUP` reply for one stream: null, `[[stream, entries]]`, `[stream, entries]` or
 * `{ stream: entries }`.
 */
export function parseReadGroup(stream: string, reply: unknown): ReturnType<typeof parseEntries> {
  if (reply === null || reply === undefined) return { entries: [], deleted: [] };
  if (reply instanceof Map) return parseEntries(stream, [...reply.values()][0]);
  if (Array.isArray(reply)) {
    const first = reply[0];
    // RESP2's list of [stream, entries] pairs; ioredis 6 (RESP3 by default) hands `call` the RESP3 map
    // flattened, `[stream, entries]`, unless the command was queued before the connection was ready.
    return parseEntries(stream, Array.isArray(first) ? first[1] : reply[1]);
  }
  if (typeof reply === 'object') return parseEntries(stream, Object.values(reply)[0]);
  return { entries: [], deleted: [] };
}

/** An `XAUTOCLAIM` reply: `[nextCursor, entries, deletedIds?]`. */
export function parseAutoClaim(
  stream: string,
  reply: unknown,
): { cursor: string; entries: StreamEntry[]; deleted: string[] } {
  if (!Array.isArray(reply)) return { cursor: '0-0', entries: [], deleted: [] };
  const { entries, deleted } = parseEntries(stream, reply[1]);
  if (Array.isArray(reply[2])) for (const id of reply[2]) deleted.push(text(id));
  return { cursor: text(reply[0]), entries, deleted };
}

/** Delivery counts by id, from an extended `XPENDING` reply `[[id, consumer, idleMs, count], …]`. */
export function parsePendingCounts(reply: unknown): Map<string, number> {
  const counts = new Map<string, number>();
  if (!Array.isArray(reply)) return counts;
  for (const item of reply) {
    if (Array.isArray(item)) counts.set(text(item[0]), Number(item[3]));
  }
  return counts;
}
