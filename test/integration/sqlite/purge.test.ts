/**
 * purgeExpired under load: two processes churn claims (live leases, dead leases, short outcomes,
 * takeovers) on one file while this process purges in small batches; no live lease is ever removed.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setImmediate as yieldToEvents } from 'node:timers/promises';
import { afterAll, describe, expect, it } from 'vitest';
import { isStoreUnavailableError } from '../../../src/index.js';
import { sqliteStore } from '../../../src/sqlite/index.js';
import { runChildren } from './children.js';

const dir = mkdtempSync(join(tmpdir(), 'idempotency-kit-sqlite-purge-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('sqlite purgeExpired', () => {
  it('never removes a live lease while other processes claim, complete and take over', async () => {
    // Arrange
    const file = join(dir, 'churn.db');
    const purger = sqliteStore({ database: file });
    const rounds = 400;
    let purged = 0;
    let batches = 0;
    let busy = 0;
    let running = true;
    const purging = (async () => {
      while (running) {
        try {
          purged += await purger.purgeExpired({ limit: 20 });
          batches++;
        } catch (error) {
          // Starved of the write lock past the busy timeout (SQLite's busy handler is not fair): the
          // batch deleted nothing, and a purge job simply runs again.
          if (!isStoreUnavailableError(error)) throw error;
          busy++;
        }
        await yieldToEvents();
      }
    })();
    // Act
    const reports = await runChildren<{ violations: string[]; claims: number; held: number }>(
      './churn-child.ts',
      2,
      (i) => [file, `p${i}`, String(rounds)],
    ).finally(() => {
      running = false;
    });
    await purging;
    // Assert
    expect(reports.flatMap((r) => r.violations)).toEqual([]);
    expect(reports.map((r) => r.held)).toEqual([rounds * 2 - 5, rounds * 2 - 5]);
    // The purge really ran alongside the claims, in batches of at most 20.
    expect(purged).toBeGreaterThan(0);
    expect(batches).toBeGreaterThan(1);
    expect(busy).toBeLessThan(batches);
    const stats = await purger.stats();
    expect(stats.inProgress).toBe(2 * (rounds * 2 - 5));
    await purger.close();
  });
});
