/**
 * `stats()` for the Redis store: a `SCAN` over the store's prefix on every master, reading each record's
 * status and times with `HMGET`. Cost: `SCAN` walks the **whole keyspace** of each node (the `MATCH` filter
 * runs server-side after the walk), in pages of {@link SCAN_PAGE} keys, plus one `HMGET` per matching
 * record (tombstones left by releases are skipped). Fine for an admin command or a scrape every minute; not for a hot path.
 * @module
 */
import type { StoreStats } from '../store/store.js';
import type { RedisArg, RedisCommander } from './client.js';
import { replyNumber, replyText } from './replies.js';

/** Keys asked per `SCAN` page (a hint to the server, not a limit). */
export const SCAN_PAGE = 1000;

/** Escape glob metacharacters so the prefix matches itself only. */
export function escapeGlob(text: string): string {
  return text.replace(/[*?[\]\\]/g, '\\$&');
}

/** Wraps each command in the store's timeout and error mapping. */
export type Guard = <T>(operation: string, call: () => Promise<T>) => Promise<T>;

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
        'hash',
      ]),
    )) as [unknown, unknown[]];
    cursor = replyText(reply[0]);
    const keys = reply[1] as RedisArg[];
    const rows = await Promise.all(
      keys.map((key) =>
        guard('stats', () => node.send(undefined, ['HMGET', key, 's', 'l', 'c', 'e'])),
      ),
    );
    for (const row of rows as unknown[][]) {
      const [status, leaseUntil, createdAt, expiresAt] = row;
      if (replyOrNull(status) === 'c') {
        if (replyNumber(expiresAt) > now) stats.completed++;
      } else if (replyOrNull(status) === 'p') {
        // A lease that ended this millisecond but whose key Redis has not expired yet.
        if (replyNumber(leaseUntil) <= now) stats.staleLeases++;
        else {
          stats.inProgress++;
          const age = Math.max(now - replyNumber(createdAt), 0);
          stats.oldestLeaseAgeMs = Math.max(stats.oldestLeaseAgeMs ?? 0, age);
        }
      }
    }
  } while (cursor !== '0');
}

function replyOrNull(value: unknown): string | null {
  return value === null || value === undefined ? null : replyText(value);
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
