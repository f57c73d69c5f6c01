/**
 * SQLite batches: the engine gathers a whole turn of the event loop into one `claimMany` / `completeMany`
 * (one transaction, one commit each), and a batch keeps every item's single-call semantics, including a
 * busy write lock rejecting the whole batch with nothing applied.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { createIdempotency, isStoreUnavailableError } from '../../../src/index.js';
import { sqliteStore } from '../../../src/sqlite/index.js';

const dir = mkdtempSync(join(tmpdir(), 'idempotency-kit-sqlite-batch-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let files = 0;
const freshFile = () => join(dir, `db-${++files}.db`);

describe('SQLite batches', () => {
  it('turns the runs of one turn of the event loop into one claimMany and one completeMany', async () => {
    // Arrange
    const store = sqliteStore({ database: freshFile() });
    expect(store.capabilities).toMatchObject({ batch: true, batchWindow: 'turn' });
    const claim = vi.spyOn(store, 'claim');
    const claimMany = vi.spyOn(store, 'claimMany');
    const completeMany = vi.spyOn(store, 'completeMany');
    const idempotency = createIdempotency({ store, extendLease: false });
    // Act: 20 runs, each started in a tick of its own (as 20 HTTP requests of one poll phase are).
    const runs: Array<Promise<unknown>> = [];
    for (let i = 0; i < 20; i++) {
      runs.push(idempotency.run({ key: `turn-${i}` }, () => i));
      await new Promise((resolve) => process.nextTick(resolve));
    }
    const outcomes = (await Promise.all(runs)) as Array<{ status: string }>;
    // Assert
    expect(outcomes.every((outcome) => outcome.status === 'executed')).toBe(true);
    expect(claim).not.toHaveBeenCalled();
    expect(claimMany.mock.calls.map(([batch]) => batch.length)).toEqual([20]);
    expect(completeMany.mock.calls.map(([batch]) => batch.length)).toEqual([20]);
    await store.close();
  });

  it('rejects a whole batch when the write lock stays busy, and applies none of it', async () => {
    // Arrange: another connection holds the write lock past the store's busy timeout.
    const file = freshFile();
    const store = sqliteStore({ database: file, busyTimeoutMs: 50 });
    const holder = new Database(file);
    holder.exec('BEGIN IMMEDIATE');
    try {
      // Act
      const error = await store
        .claimMany([
          { key: 'busy-a', fingerprint: 'fp', leaseMs: 60_000 },
          { key: 'busy-b', fingerprint: 'fp', leaseMs: 60_000 },
        ])
        .catch((e: unknown) => e);
      // Assert
      expect(isStoreUnavailableError(error)).toBe(true);
    } finally {
      holder.exec('ROLLBACK');
      holder.close();
    }
    expect(await store.get('busy-a')).toBeUndefined();
    expect(await store.get('busy-b')).toBeUndefined();
    const [a, b] = await store.claimMany([
      { key: 'busy-a', fingerprint: 'fp', leaseMs: 60_000 },
      { key: 'busy-b', fingerprint: 'fp', leaseMs: 60_000 },
    ]);
    expect(a?.claimed && b?.claimed).toBe(true);
    await store.close();
  });
});
