/**
 * One way to send a raw command through node-redis (`sendCommand`) or ioredis (`call`), and parsers for the
 * stream replies in both RESP2 (arrays) and RESP3 (maps) forms.
 * @module
 */
/** A connected node-redis (v4–v6) or ioredis client, typed by the one method each uses for raw commands. */
export type RedisStreamsClient =
  | { sendCommand(args: string[]): Promise<unknown> }
  | { call(command: string, ...args: string[]): Promise<unknown> };

/** One stream entry, as handlers receive it. */
export interface StreamEntry {
  /** The stream's key. */
  stream: string;
  /** The entry id (`1700000000000-0`). */
  id: string;
  /** The entry's fields. */
  fields: Record<string, string>;
}

/** True when `client` has a raw command method this adapter can use. */
export function isStreamsClient(client: unknown): client is RedisStreamsClient {
  if (typeof client !== 'object' || client === null) return false;
  const c = client as { call?: unknown; sendCommand?: unknown };
  return typeof c.call === 'function' || typeof c.sendCommand === 'function';
}

/** Send `args` as one command. */
export function command(client: RedisStreamsClient, args: string[]): Promise<unknown> {
  // ioredis also has a `sendCommand`, taking a Command object, so look for its `call` first.
  if ('call' in client && typeof client.call === 'function') {
    const [name, ...rest] = args;
    return client.call(name as string, ...rest);
  }
  if ('sendCommand' in client && typeof client.sendCommand === 'function') {
    return client.sendCommand(args);
  }
  throw new TypeError('client: neither node-redis sendCommand nor ioredis call found');
}

const text = (value: unknown): string =>
  Buffer.isBuffer(value) ? value.toString('utf8') : String(value);

function toFields(raw: unknown): Record<string, string> | undefined {
  if (!Array.isArray(raw)) return undefined;
  const fields: Record<string, string> = {};
  for (let i = 0; i + 1 < raw.length; i += 2) fields[text(raw[i])] = text(raw[i + 1]);
  return fields;
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
    const fields = toFields(item[1]);
    if (fields === undefined) deleted.push(id);
    else entries.push({ stream, id, fields });
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
