/**
 * `listCrashed()` for the Redis store. Redis keeps no order of its keys, so the listing follows `SCAN`
 * over the store's prefix, master after master (see `scan.ts`): each `SCAN` page's keys are read by their
 * header (`GETRANGE`, never an outcome), the in-progress ones whose lease had ended are inspected
 * (`inspect-2.lua`, read-only, judged by Redis's clock), and those still reserved are the page's, in byte
 * order within that `SCAN` page.
 *
 * Paging: `next` is a `SCAN` position, `<master>:<cursor>` (the master's index in the client's list of
 * masters, and the `SCAN` cursor to continue from), or `<master>:<cursor>:<key>` when the page filled up in
 * the middle of a `SCAN` page: that `SCAN` page is read again, and only its keys after `<key>` are
 * listed. `SCAN` returns every key that exists for the whole walk; a key created or removed meanwhile
 * may be missed, and a key may come twice when the keyspace is resized between pages (or when a
 * failover or a resharding changes the masters), so a caller that must count dedupes by key.
 * @module
 */
import { InvalidOptionsError } from '../core/errors.js';
import { KeyState, stateOf } from '../core/inspection.js';
import { type InProgressRecord, RecordStatus } from '../core/record.js';
import { checkListCrashedOptions } from '../store/crashed-paging.js';
import type {
  CrashedRecordInspection,
  CrashedRecordsPage,
  ListCrashedOptions,
  RecordInspection,
} from '../store/store.js';
import type { RedisArg, RedisCommander } from './client.js';
import type { Guard } from './guard.js';
import { readHeaders, recordKeyPattern, redisNowMs, scanRecordKeys } from './scan.js';

const OPERATION = 'listCrashed';

/** Where a listing stands: a master, the `SCAN` cursor on it, and the last key listed from that page. */
export interface ScanPosition {
  /** The master's index in `RedisCommander.masters()`. */
  node: number;
  /** The `SCAN` cursor on that master (`'0'`: from its start). */
  cursor: string;
  /** The last key already listed from the `SCAN` page at `cursor`; absent: none was. */
  afterKey?: string;
}

/** A position as `next` carries it: `<master>:<cursor>` or `<master>:<cursor>:<key>`. */
export function encodeScanPosition(position: ScanPosition): string {
  const { node, cursor, afterKey } = position;
  return afterKey === undefined ? `${node}:${cursor}` : `${node}:${cursor}:${afterKey}`;
}

/**
 * The position `after` names (the start of the listing when absent).
 * @throws InvalidOptionsError when `after` is not a position `next` gave (a key, say: Redis pages are
 * not in key order).
 */
export function decodeScanPosition(after: string | undefined): ScanPosition {
  if (after === undefined) return { node: 0, cursor: '0' };
  // The key comes last and may hold colons itself.
  const match = /^(0|[1-9][0-9]{0,5}):(0|[1-9][0-9]{0,19})(?::([\s\S]*))?$/.exec(after);
  if (match === null) {
    throw new InvalidOptionsError(
      `redisStore: listCrashed after must be the \`next\` of a previous page (<master>:<cursor>[:<key>]), got ${JSON.stringify(after)}`,
    );
  }
  const [, node, cursor, afterKey] = match as unknown as [string, string, string, string?];
  const position: ScanPosition = { node: Number(node), cursor };
  if (afterKey !== undefined) position.afterKey = afterKey;
  return position;
}

/** What the listing needs of the store: its client, its prefix, its guard and its `inspect`. */
export interface ListCrashedContext {
  commander: RedisCommander;
  prefix: string;
  guard: Guard;
  inspect(key: string): Promise<RecordInspection | undefined>;
}

/** One page of the crashed claims under the store's prefix (see the module's comment for the paging). */
export async function listCrashedRecords(
  context: ListCrashedContext,
  options: ListCrashedOptions,
): Promise<CrashedRecordsPage> {
  const { limit, after } = checkListCrashedOptions(options, 'redisStore');
  let position = decodeScanPosition(after);
  const { commander, guard } = context;
  const nodes = await guard(OPERATION, () => commander.masters());
  const records: CrashedRecordInspection[] = [];
  while (position.node < nodes.length) {
    const node = nodes[position.node] as RedisCommander;
    const scanned = await crashedOfScanPage(context, node, position);
    for (const entry of scanned.records) {
      if (records.length === limit) {
        // Full in the middle of this SCAN page: the next page reads it again, after the last key listed.
        const afterKey = (records.at(-1) as CrashedRecordInspection).key;
        return { records, next: encodeScanPosition({ ...position, afterKey }) };
      }
      records.push(entry);
    }
    position =
      scanned.cursor === '0'
        ? { node: position.node + 1, cursor: '0' }
        : { node: position.node, cursor: scanned.cursor };
    if (records.length === limit) break;
  }
  return position.node < nodes.length
    ? { records, next: encodeScanPosition(position) }
    : { records };
}

/**
 * The crashed records of the `SCAN` page at `position` on `node`, after `position.afterKey`, in byte order
 * of their keys, and the cursor that follows the page.
 */
async function crashedOfScanPage(
  context: ListCrashedContext,
  node: RedisCommander,
  position: ScanPosition,
): Promise<{ records: CrashedRecordInspection[]; cursor: string }> {
  const { prefix, guard } = context;
  // Read before the SCAN: a lease that had ended by then is a candidate, inspected afterwards.
  const now = await redisNowMs(node, guard, OPERATION);
  const page = await scanRecordKeys(
    node,
    position.cursor,
    recordKeyPattern(prefix),
    guard,
    OPERATION,
  );
  const headers = await readHeaders(node, page.keys, guard, OPERATION);
  const candidates: string[] = [];
  for (const [i, header] of headers.entries()) {
    // Only an in-progress value whose lease has ended can be a crashed claim: live leases and outcomes
    // are never inspected (an outcome may be large).
    if (header?.status !== RecordStatus.InProgress || header.liveUntil > now) continue;
    const key = storageKeyOf(page.keys[i] as RedisArg, prefix);
    if (position.afterKey === undefined || compareBytes(key, position.afterKey) > 0) {
      candidates.push(key);
    }
  }
  candidates.sort(compareBytes);
  const inspected = await Promise.all(candidates.map((key) => context.inspect(key)));
  const records: CrashedRecordInspection[] = [];
  for (const [i, inspection] of inspected.entries()) {
    // Judged by the inspection's own clock, as inspectKey judges it: taken over, completed or expired
    // since the header was read, it is no longer crashed.
    if (
      inspection === undefined ||
      stateOf(inspection.record, inspection.now) !== KeyState.Crashed
    ) {
      continue;
    }
    const record = inspection.record as InProgressRecord;
    records.push({ key: candidates[i] as string, record, now: inspection.now });
  }
  return { records, cursor: page.cursor };
}

/** The storage key of a record key `<prefix>{<storage key>}`. */
function storageKeyOf(redisKey: RedisArg, prefix: string): string {
  const text = typeof redisKey === 'string' ? redisKey : redisKey.toString('utf8');
  return text.slice(prefix.length + 1, -1);
}

/** Byte order of the UTF-8 keys, as the SQL stores sort them. */
function compareBytes(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a), Buffer.from(b));
}
