/**
 * SQLite batches: while the event loop is busy the engine gathers a whole turn of it into one `claimMany` /
 * `completeMany` (one transaction, one commit each), while an idle loop sends each tick's calls at its end;
 * a batch keeps every item's single-call semantics, including a busy write lock rejecting the whole batch
 * with nothing applied.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it, vi } from 'vitest';
import {
  createIdempotency,
  type Idempotency,
  isStoreUnavailableError,
} from '../../../src/index.js';
import { sqliteStore } from '../../../src/sqlite/index.js';
import { busyEventLoop, idleEventLoop } from '../../helpers/event-loop.js';

const dir = mkdtempSync(join(tmpdir(), 'idempotency-kit-sqlite-batch-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let files = 0;
const freshFile = () => join(dir, `db-${++files}.db`);

/**
 * A store on a fresh file with its claim and batch methods spied on, an engine over it, and the claims
 * each store call carried, in order.
 */
function spiedStore() {
  const store = sqliteStore({ database: freshFile() });
  const calls = {
    claim: vi.spyOn(store, 'claim'),
    claimMany: vi.spyOn(store, 'claimMany'),
    completeMany: vi.spyOn(store, 'completeMany'),
    completeAndClaimMany: vi.spyOn(store, 'completeAndClaimMany'),
  };
  const claimBatches = () => {
    const sizes: Array<{ order: number; size: number }> = [
      ...calls.claim.mock.invocationCallOrder.map((order) => ({ order, size: 1 })),
      ...calls.claimMany.mock.calls.map(([batch], i) => ({
        order: calls.claimMany.mock.invocationCallOrder[i] as number,
        size: batch.length,
      })),
      ...calls.completeAndClaimMany.mock.calls.map(([, claims], i) => ({
        order: calls.completeAndClaimMany.mock.invocationCallOrder[i] as number,
        size: claims.length,
      })),
    ];
    return sizes
      .filter(({ size }) => size > 0)
      .sort((a, b) => a.order - b.order)
      .map(({ size }) => size);
  };
  return {
    store,
    calls,
    claimBatches,
    idempotency: createIdempotency({ store, extendLease: false }),
  };
}

/** 20 runs, each started in a tick of its own (as 20 HTTP requests of one poll phase are). */
async function runsInTicksOfTheirOwn(
  idempotency: Idempotency,
  prefix: string,
): Promise<Array<{ status: string }>> {
  const runs: Array<Promise<unknown>> = [];
  for (let i = 0; i < 20; i++) {
    runs.push(idempotency.run({ key: `${prefix}-${i}` }, () => i));
    await new Promise((resolve) => process.nextTick(resolve));
  }
  return (await Promise.all(runs)) as Array<{ status: string }>;
}

describe('SQLite batches', () => {
  it('turns the runs of one turn of a busy event loop into one claimMany and one completeMany', async () => {
    // Arrange
    const { store, calls, claimBatches, idempotency } = spiedStore();
    expect(store.capabilities).toMatchObject({
      batch: true,
      batchWindow: 'tick',
      batchWindowWhenBusy: 'turn',
    });
    busyEventLoop();
    // Act
    const outcomes = await runsInTicksOfTheirOwn(idempotency, 'busy');
    // Assert
    expect(outcomes.every((outcome) => outcome.status === 'executed')).toBe(true);
    expect(calls.claim).not.toHaveBeenCalled();
    expect(claimBatches()).toEqual([20]);
    expect(calls.claimMany.mock.calls.map(([batch]) => batch.length)).toEqual([20]);
    expect(calls.completeMany.mock.calls.map(([batch]) => batch.length)).toEqual([20]);
    await store.close();
  });

  it("sends each tick's claims at its end while the event loop is idle", async () => {
    // Arrange
    const { store, claimBatches, idempotency } = spiedStore();
    await idleEventLoop();
    // Act
    const outcomes = await runsInTicksOfTheirOwn(idempotency, 'idle');
    // Assert: the first run's claim did not wait for the other 19 runs of the turn.
    expect(outcomes.every((outcome) => outcome.status === 'executed')).toBe(true);
    const batches = claimBatches();
    expect(batches[0]).toBe(1);
    expect(batches.reduce((sum, size) => sum + size, 0)).toBe(20);
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
