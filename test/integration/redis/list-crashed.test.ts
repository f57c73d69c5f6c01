/**
 * The Redis store's `listCrashed` over more records than one `SCAN` page holds: its paging follows `SCAN`
 * positions across pages (and through the middle of one), giving each crashed claim once and never a live
 * lease, for both clients.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { CrashedRecordsPage } from '../../../src/index.js';
import { SCAN_PAGE } from '../../../src/redis/scan.js';
import type { RedisLib } from '../../helpers/redis-clients.js';
import { rawRedisStore, redisClientsForFile } from '../../helpers/redis-file-connection.js';

const prefix = `idemtest:listcrashed:${randomUUID().slice(0, 8)}:`;
// A database of its own: how the walk splits into pages (asserted below) depends on every key SCAN
// walks, and the shared database 0 may hold any number of other keys (a benchmark's, a developer's).
const clients = redisClientsForFile(prefix, { database: 13 });
const DAY = 86_400_000;

describe.each<RedisLib>(['node-redis', 'ioredis'])('redis listCrashed (%s)', (lib) => {
  const redis = rawRedisStore(clients, lib, prefix);

  it('pages through several SCAN pages, listing each crashed claim once and no live lease', async () => {
    // Arrange: twice a SCAN page of live leases, among which 80 claims crash. The database also holds
    // the other client's run's keys, so the walk takes up to ~5 SCAN pages; 80 crashed keys over at most 10
    // pages put 8 or more in one of them, more than a listing page of 7 holds, so some listing page ends
    // inside a SCAN page whatever order SCAN returns the keys in (with 30, a walk of 5 pages could give
    // each 6 and never end inside one).
    const { store } = redis;
    const crashed = Array.from({ length: 80 }, () => `crashed-${randomUUID()}`);
    const live = Array.from({ length: SCAN_PAGE * 2 }, () => `live-${randomUUID()}`);
    const claims = await Promise.all([
      ...crashed.map((key) => store.claim(key, { fingerprint: 'fp', leaseMs: 50, reserveMs: DAY })),
      ...live.map((key) =>
        store.claim(key, { fingerprint: 'fp', leaseMs: 60_000, reserveMs: DAY }),
      ),
    ]);
    expect(claims.every((claim) => claim.claimed)).toBe(true);
    await new Promise((resolve) => setTimeout(resolve, 200));
    // Act
    const pages: CrashedRecordsPage[] = [];
    let after: string | undefined;
    do {
      const page = await store.listCrashed(
        after === undefined ? { limit: 7 } : { limit: 7, after },
      );
      pages.push(page);
      after = page.next;
    } while (after !== undefined && pages.length < 1000);
    // Assert
    const listed = pages.flatMap((page) => page.records.map((record) => record.key));
    expect(listed.sort()).toEqual([...crashed].sort());
    expect(pages.every((page) => page.records.length <= 7)).toBe(true);
    // The walk went on from SCAN cursors, and also from the middle of a SCAN page (a key after the cursor).
    const positions = pages.flatMap((page) => (page.next === undefined ? [] : [page.next]));
    expect(positions.some((next) => /^0:[1-9][0-9]*(:|$)/.test(next))).toBe(true);
    expect(positions.some((next) => /^0:[0-9]+:crashed-/.test(next))).toBe(true);
    // One page as large as the listing holds it all, and says it is complete.
    const whole = await store.listCrashed({ limit: 1000 });
    expect(whole.records.map((record) => record.key).sort()).toEqual([...crashed].sort());
    expect(whole.next).toBeUndefined();
  });
});
