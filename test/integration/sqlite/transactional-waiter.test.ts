/**
 * The SQLite transactional mode when its handler throws after writing while another call in the same
 * process (a worker thread, with its own connection on the same file) waits for the write lock in its
 * `BEGIN IMMEDIATE`: nothing the failed handler wrote survives, and the waiter gets the lock, claims the
 * key and executes, well within its busy timeout. In WAL and rollback-journal mode.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { sqliteTransactional } from '../../../src/sqlite/index.js';
import type { WaitingWorkerData, WaitingWorkerReport } from './waiting-worker.js';

const dir = mkdtempSync(join(tmpdir(), 'idempotency-kit-sqlite-tx-waiter-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** How long the failing handler holds the lock once the waiter has started waiting. */
const HOLD_MS = 300;

/** Block this thread for `ms` (the handler is synchronous: the lock must stay held meanwhile). */
function blockFor(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/** Start the waiting worker on `file` for `key`; resolves once its connection is open. */
async function startWaiter(data: WaitingWorkerData) {
  // A worker does not take `--import tsx` from execArgv: it registers tsx itself, then loads the script.
  const script = new URL('./waiting-worker.ts', import.meta.url).href;
  const worker = new Worker(
    `import('tsx/esm/api').then(({ register }) => { register(); return import(${JSON.stringify(script)}); })`,
    { eval: true, workerData: data },
  );
  const messages: unknown[] = [];
  const listeners: Array<() => void> = [];
  worker.on('message', (message) => {
    messages.push(message);
    for (const listener of listeners.splice(0)) listener();
  });
  const next = (index: number) =>
    new Promise<unknown>((resolve, reject) => {
      const check = () => {
        if (messages.length > index) resolve(messages[index]);
        else listeners.push(check);
      };
      worker.once('error', reject);
      check();
    });
  await next(0);
  return { worker, report: () => next(1) as Promise<WaitingWorkerReport> };
}

// WAL (recommended) and the rollback journal (SQLite's default), whose locks differ.
describe.each(['wal', 'delete'])(
  'sqliteTransactional (journal_mode %s): a failed handler and a call waiting for the lock',
  (journalMode) => {
    it('leaves none of the failed handler’s writes, and the waiter proceeds to execute', async () => {
      // Arrange
      const file = join(dir, `waiter-${journalMode}.db`);
      const db = new Database(file, { timeout: 10_000 });
      db.pragma(`journal_mode = ${journalMode}`);
      db.exec(
        'CREATE TABLE payments (id INTEGER PRIMARY KEY, idempotency_key TEXT NOT NULL, payer TEXT NOT NULL)',
      );
      const transactional = sqliteTransactional({ database: db });
      const insert = db.prepare('INSERT INTO payments (idempotency_key, payer) VALUES (?, ?)');
      const key = 'pay-1';
      const flags = new Int32Array(new SharedArrayBuffer(4));
      const { worker, report } = await startWaiter({ file, key, flags });
      try {
        // Act: the handler writes, lets the waiter start its call, holds the lock a while, then throws.
        const error = await transactional
          .runInTransaction({ key }, () => {
            insert.run(key, 'failed handler');
            worker.postMessage('go');
            Atomics.wait(flags, 0, 0, 10_000);
            blockFor(HOLD_MS);
            throw new Error('card declined');
          })
          .catch((e: unknown) => e);
        const waiter = await report();
        // Assert
        expect((error as Error).message).toBe('card declined');
        expect(waiter.error).toBeUndefined();
        expect(waiter.outcome).toMatchObject({
          status: 'executed',
          value: 'charged by the waiter',
        });
        // It did wait for the lock (it could not have claimed the key while the handler held it).
        expect(waiter.tookMs).toBeGreaterThanOrEqual(HOLD_MS / 2);
        const rows = db
          .prepare('SELECT payer FROM payments WHERE idempotency_key = ?')
          .all(key) as Array<{ payer: string }>;
        expect(rows).toEqual([{ payer: 'waiter' }]);
        // The waiter's outcome is the key's: replayed here without running the handler.
        let ran = false;
        const replay = await transactional.runInTransaction({ key }, () => {
          ran = true;
          return 'again';
        });
        expect(replay).toEqual({ status: 'replayed', value: 'charged by the waiter' });
        expect(ran).toBe(false);
      } finally {
        await worker.terminate();
        db.close();
      }
    });
  },
);
