/**
 * `stats()` for the Redis store: a `SCAN` over the store's prefix on every master (see `scan.ts`),
 * reading the header of each record's value (status and times) with `GETRANGE`, never the outcome. Cost:
 * the whole keyspace of each node walked, plus one `GETRANGE` per matching record (tombstones are
 * skipped). Fine for an admin command or a scrape every minute; not for a hot path.
 * @module
 */
import { RecordStatus } from '../core/record.js';
import type { StoreStats } from '../store/store.js';
import type { RedisCommander } from './client.js';
import type { Guard } from './guard.js';
import { readHeaders, recordKeyPattern, redisNowMs, scanRecordKeys } from './scan.js';

export { escapeGlob, SCAN_PAGE } from './scan.js';

async function scanNode(
  node: RedisCommander,
  pattern: string,
  guard: Guard,
  stats: StoreStats,
): Promise<void> {
  const now = await redisNowMs(node, guard, 'stats');
  let cursor = '0';
  do {
    const page = await scanRecordKeys(node, cursor, pattern, guard, 'stats');
    cursor = page.cursor;
    for (const header of await readHeaders(node, page.keys, guard, 'stats')) {
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
  const pattern = recordKeyPattern(prefix);
  const nodes = await guard('stats', () => commander.masters());
  // Nodes are scanned one after another: a stats call should not load every master at once.
  for (const node of nodes) await scanNode(node, pattern, guard, stats);
  return stats;
}
