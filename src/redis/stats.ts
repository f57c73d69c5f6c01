/**
 * `stats()` for the Redis store: a `SCAN` over the store's prefix on every master, reading the header of
 * each record's value (status and times) with `GETRANGE`, never the outcome. Cost: `SCAN` walks the
 * **whole keyspace** of each node (the `MATCH` filter runs server-side after the walk), in pages of
 * {@link SCAN_PAGE} keys, plus one `GETRANGE` per matching record (tombstones are skipped). Fine for an
 * admin command or a scrape every minute; not for a hot path.
 * @module
 */
import { RecordStatus } from '../core/record.js';
import type { StoreStats } from '../store/store.js';
import type { RedisArg, RedisCommander } from './client.js';
import type { Guard } from './guard.js';
import { decodeHeader, replyNumber, replyText } from './replies.js';

// Enough bytes for a value's status, token and two times (about 50), never its fingerprint or outcome.
const HEADER_BYTES = '95';

/** Keys asked per `SCAN` page (a hint to the server, not a limit). */
export const SCAN_PAGE = 1000;

/** Escape glob metacharacters so the prefix matches itself only. */
export function escapeGlob(text: string): string {
  return text.replace(/[*?[\]\\]/g, '\\$&');
}

function redisNowMs(reply: unknown): number {
  const [seconds, micros] = reply as [unknown, unknown];
  return replyNumber(seconds) * 1000 + Math.floor(replyNumber(micros) / 1000);
}

async function scanNode(
  node: RedisCommander,
  pattern: string,
  guard: Guard,
  stats: StoreStats,
): Promise<void> {
  const now = redisNowMs(await guard('stats', () => node.send(undefined, ['TIME'])));
  let cursor = '0';
  do {
    const reply = (await guard('stats', () =>
      node.send(undefined, [
        'SCAN',
        cursor,
        'MATCH',
        pattern,
        'COUNT',
        String(SCAN_PAGE),
        'TYPE',
        'string',
      ]),
    )) as [unknown, unknown[]];
    cursor = replyText(reply[0]);
    const keys = reply[1] as RedisArg[];
    const values = await Promise.all(
      keys.map((key) =>
        guard('stats', () => node.send(undefined, ['GETRANGE', key, '0', HEADER_BYTES])),
      ),
    );
    for (const value of values) {
      // A key that expired between SCAN and GETRANGE reads as an empty string.
      if (value === null || value === undefined || replyText(value) === '') continue;
      const header = decodeHeader(value);
      if (header === undefined) continue;
      if (header.status === RecordStatus.Completed) {
        if (header.liveUntil > now) stats.completed++;
      } else if (header.liveUntil <= now) {
        // A dead lease whose key lives on: a crashed claim's reservation (its key expires when the
        // reservation ends), or a lease that ended this millisecond, before Redis expired its key.
        stats.staleLeases++;
      } else {
        stats.inProgress++;
        const age = Math.max(now - header.since, 0);
        stats.oldestLeaseAgeMs = Math.max(stats.oldestLeaseAgeMs ?? 0, age);
      }
    }
  } while (cursor !== '0');
}

/** Count the records under `prefix` on every master. */
export async function scanStats(
  commander: RedisCommander,
  prefix: string,
  guard: Guard,
): Promise<StoreStats> {
  const stats: StoreStats = { inProgress: 0, completed: 0, staleLeases: 0, oldestLeaseAgeMs: null };
  const pattern = `${escapeGlob(prefix)}{*}`;
  const nodes = await guard('stats', () => commander.masters());
  // Nodes are scanned one after another: a stats call should not load every master at once.
  for (const node of nodes) await scanNode(node, pattern, guard, stats);
  return stats;
}
