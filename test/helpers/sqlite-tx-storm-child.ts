/**
 * Child process of the transactional cross-process test: opens the shared file on a connection of its own,
 * waits at the barrier, then runs every key through `runInTransaction` (each execution writes one business
 * row in the transaction) and reports what each call answered.
 * Args: <file> <key prefix> <key count>
 */
import Database from 'better-sqlite3';
import { isStoreUnavailableError } from '../../src/index.js';
import { sqliteTransactional } from '../../src/sqlite/index.js';
import { barrier, report } from '../integration/sqlite/children.js';

/** What one child sends back. */
export interface StormReport {
  pid: number;
  executed: string[];
  /** key → the pid found in the replayed value (the process that executed it). */
  replayed: Record<string, number>;
  other: string[];
  /** Calls retried after StoreUnavailableError (the lock waited past the busy timeout). */
  busyRetries: number;
}

const [file, prefix, count] = process.argv.slice(2);
if (file === undefined || prefix === undefined || count === undefined) {
  throw new Error('usage: sqlite-tx-storm-child <file> <prefix> <count>');
}
// A long busy timeout: on a loaded 2-core machine, four writers queue on one lock.
const db = new Database(file, { timeout: 30_000 });
const transactional = sqliteTransactional({ database: db });
const pause = new Int32Array(new SharedArrayBuffer(4));
const insert = db.prepare('INSERT INTO payments (idempotency_key, pid, token) VALUES (?, ?, ?)');

await barrier();
const result: StormReport = {
  pid: process.pid,
  executed: [],
  replayed: {},
  other: [],
  busyRetries: 0,
};
// Every process walks the keys in the same order, so they collide on each one.
for (let i = 0; i < Number(count); i++) {
  const key = `${prefix}-${i}`;
  for (;;) {
    try {
      const outcome = transactional.runInTransactionSync({ key, payload: { i } }, (tx) => {
        insert.run(key, process.pid, tx.token);
        // Hold the write lock a little (blocking, as any synchronous handler does), so that the other
        // processes' duplicates arrive meanwhile and queue on the lock.
        Atomics.wait(pause, 0, 0, 2);
        return { pid: process.pid };
      });
      if (outcome.status === 'executed') result.executed.push(key);
      else if (outcome.status === 'replayed') result.replayed[key] = outcome.value.pid;
      else result.other.push(`${key}:${outcome.status}`);
      break;
    } catch (error) {
      // What a client does with a 503: retry. Nothing was committed.
      if (!isStoreUnavailableError(error)) throw error;
      result.busyRetries++;
    }
  }
}
db.close();
report(result);
