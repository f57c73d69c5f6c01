/**
 * A worker thread of the test process (test/integration/sqlite/transactional-waiter.test.ts): its own
 * connection on the parent's file. On 'go' it raises the shared flag and, at once, runs a transactional
 * call for the parent's key, which waits for the parent's write lock (the busy timeout); it posts the
 * outcome and how long the call took.
 */
import { parentPort, workerData } from 'node:worker_threads';
import Database from 'better-sqlite3';
import { sqliteTransactional } from '../../../src/sqlite/index.js';

/** What the parent passes. */
export interface WaitingWorkerData {
  file: string;
  key: string;
  /** Int32Array over a SharedArrayBuffer: index 0 becomes 1 right before the call. */
  flags: Int32Array;
}

/** What the worker posts back. */
export interface WaitingWorkerReport {
  outcome?: unknown;
  error?: string;
  tookMs: number;
}

const { file, key, flags } = workerData as WaitingWorkerData;
const db = new Database(file, { timeout: 10_000 });
const transactional = sqliteTransactional({ database: db, migrate: false });
const insert = db.prepare('INSERT INTO payments (idempotency_key, payer) VALUES (?, ?)');

parentPort?.once('message', () => {
  Atomics.store(flags, 0, 1);
  Atomics.notify(flags, 0);
  const startedAt = performance.now();
  let report: WaitingWorkerReport;
  try {
    const outcome = transactional.runInTransactionSync({ key }, () => {
      insert.run(key, 'waiter');
      return 'charged by the waiter';
    });
    report = { outcome, tookMs: performance.now() - startedAt };
  } catch (error) {
    report = { error: String(error), tookMs: performance.now() - startedAt };
  }
  db.close();
  parentPort?.postMessage(report);
});
parentPort?.postMessage('ready');
