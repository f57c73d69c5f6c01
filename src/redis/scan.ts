/**
 * Walking the Redis store's records with `SCAN`, shared by `stats()` and `listCrashed()`: the pattern of
 * the store's record keys, one `SCAN` page of them on one master, the first bytes of their values
 * (`GETRANGE`: status and times, never an outcome), and Redis's clock. `SCAN` walks the **whole keyspace**
 * of each node (the `MATCH` filter runs server-side after the walk), in pages of about {@link SCAN_PAGE}
 * keys: fine for an admin command, never for a hot path.
 * @module
 */
import type { RedisArg, RedisCommander } from './client.js';
import type { Guard } from './guard.js';
import { decodeHeader, replyNumber, replyText, type ValueHeader } from './replies.js';

// Enough bytes for a value's status, token and two times (about 50), never its fingerprint or outcome.
const HEADER_BYTES = '95';

/** Keys asked per `SCAN` page (a hint to the server, not a limit). */
export const SCAN_PAGE = 1000;

/** Escape glob metacharacters so the prefix matches itself only. */
export function escapeGlob(text: string): string {
  return text.replace(/[*?[\]\\]/g, '\\$&');
}

/**
 * The `MATCH` pattern of the records under `prefix`: `<prefix>{*}`. A steps hash (`<prefix>{…}:s`) does not
 * match it, nor does a record under a longer prefix (`<prefix>x:{…}`): the `{` must follow the prefix.
 */
export function recordKeyPattern(prefix: string): string {
  return `${escapeGlob(prefix)}{*}`;
}

/** Redis's clock (`TIME`) on `node`, in epoch ms. */
export async function redisNowMs(
  node: RedisCommander,
  guard: Guard,
  operation: string,
): Promise<number> {
  const [seconds, micros] = (await guard(operation, () => node.send(undefined, ['TIME']))) as [
    unknown,
    unknown,
  ];
  return replyNumber(seconds) * 1000 + Math.floor(replyNumber(micros) / 1000);
}

/** One `SCAN` page: the cursor to continue from (`'0'`: the walk is over) and the keys it returned. */
export interface ScanPage {
  cursor: string;
  keys: RedisArg[];
}

/** One `SCAN` page of record keys (strings matching `pattern`) on `node`, from `cursor`. */
export async function scanRecordKeys(
  node: RedisCommander,
  cursor: string,
  pattern: string,
  guard: Guard,
  operation: string,
): Promise<ScanPage> {
  const command = ['SCAN', cursor, 'MATCH', pattern, 'COUNT', String(SCAN_PAGE), 'TYPE', 'string'];
  const reply = (await guard(operation, () => node.send(undefined, command))) as [
    unknown,
    unknown[],
  ];
  return { cursor: replyText(reply[0]), keys: reply[1] as RedisArg[] };
}

/**
 * The header of each key's value, in the order of `keys`: `undefined` for a tombstone, or a key that
 * expired since the `SCAN` (read as an empty string).
 */
export async function readHeaders(
  node: RedisCommander,
  keys: readonly RedisArg[],
  guard: Guard,
  operation: string,
): Promise<Array<ValueHeader | undefined>> {
  const values = await Promise.all(
    keys.map((key) =>
      guard(operation, () => node.send(undefined, ['GETRANGE', key, '0', HEADER_BYTES])),
    ),
  );
  return values.map((value) =>
    value === null || value === undefined || replyText(value) === ''
      ? undefined
      : decodeHeader(value),
  );
}
