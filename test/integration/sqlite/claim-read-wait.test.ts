/**
 * A claim's lock-free read on a connection in rollback-journal mode waits (the busy timeout) while another
 * connection holds the file's exclusive lock, as it does while committing. A lease that expires during that
 * wait must be judged expired: the claim takes the key over. It used to read its clock before the read and
 * judge the row, once read, at that earlier time: the dead lease was "in progress" (a 409 instead of a
 * takeover). A worker thread holds the lock and moves the store's clock past the lease as soon as the claim
 * has read it, then commits; in WAL mode a reader never waits, so the case is rollback-journal only.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import type { ClaimResult } from '../../../src/index.js';
import { type SqliteStore, sqliteStore, sqliteTransactional } from '../../../src/sqlite/index.js';

const dir = mkdtempSync(join(tmpdir(), 'idempotency-kit-sqlite-claim-read-wait-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const T = 1_700_000_000_000;
const LEASE_MS = 1000;
// The cells shared with the worker: [0] becomes 1 at the store's first clock read once armed; [1] is the
// clock's offset from T, which the worker moves past the lease while it holds the lock.
const CLOCK_READ = 0;
const OFFSET = 1;

// The lock holder: a plain script (no TypeScript to load), on its own connection to the file. It takes the
// exclusive lock (readers wait for it in rollback-journal mode), waits for the claim to read its clock,
// moves the clock past the lease, keeps the lock a little longer (the claim is blocked in its read by now),
// and commits.
const HOLDER = `
const { workerData, parentPort } = require('node:worker_threads');
const Database = require(workerData.driver);
const cells = workerData.cells;
const db = new Database(workerData.file);
db.exec('BEGIN EXCLUSIVE');
parentPort.postMessage('held');
if (Atomics.wait(cells, ${CLOCK_READ}, 0, 10000) === 'timed-out') throw new Error('no clock read');
Atomics.store(cells, ${OFFSET}, ${LEASE_MS + 500});
Atomics.wait(cells, 2, 0, 100);
db.exec('COMMIT');
db.close();
`;

/** A store on `file` in rollback-journal mode whose clock the worker moves; `arm` makes it signal a read. */
function fixture(file: string) {
  const cells = new Int32Array(new SharedArrayBuffer(12));
  let armed = false;
  const db = new Database(file, { timeout: 10_000 });
  db.pragma('journal_mode = DELETE');
  const clock = {
    now: () => {
      if (armed && Atomics.load(cells, CLOCK_READ) === 0) {
        Atomics.store(cells, CLOCK_READ, 1);
        Atomics.notify(cells, CLOCK_READ);
      }
      return T + Atomics.load(cells, OFFSET);
    },
  };
  const store = sqliteStore({ database: db, clock });
  return {
    store,
    transactional: sqliteTransactional({ database: db, clock, migrate: false }),
    /** Hold the file's exclusive lock in a worker; resolves once held, and its `done` once committed. */
    async holdLock(): Promise<{ done: Promise<void> }> {
      armed = true;
      const driver = createRequire(import.meta.url).resolve('better-sqlite3');
      const worker = new Worker(HOLDER, { eval: true, workerData: { file, cells, driver } });
      const done = new Promise<void>((resolve, reject) => {
        worker.once('error', reject);
        worker.once('exit', () => resolve());
      });
      await new Promise<void>((resolve, reject) => {
        worker.once('message', () => resolve());
        worker.once('error', reject);
      });
      return { done };
    },
    close: () => db.close(),
  };
}

describe('sqlite store, rollback-journal mode: a lease that expires while the claim’s read waits', () => {
  it.each<[string, (store: SqliteStore, key: string) => Promise<ClaimResult>]>([
    ['claim', (s, key) => s.claim(key, { fingerprint: 'fp', leaseMs: LEASE_MS })],
    [
      'claimMany',
      async (s, key) =>
        (await s.claimMany([{ key, fingerprint: 'fp', leaseMs: LEASE_MS }]))[0] as ClaimResult,
    ],
  ])('is taken over by %s, not reported in progress', async (operation, claim) => {
    // Arrange: a claim whose holder crashed, its lease live until T + LEASE_MS
    const f = fixture(join(dir, `${operation}.db`));
    expect(await claim(f.store, 'k')).toMatchObject({ claimed: true, attempt: 1 });
    const holder = await f.holdLock();
    // Act: the claim reads the clock at T, then waits for the lock until the lease has expired
    const result = await claim(f.store, 'k');
    await holder.done;
    // Assert
    expect(result).toMatchObject({ claimed: true, attempt: 2 });
    f.close();
  });

  it('is taken over by runInTransactionSync, not reported in progress', async () => {
    // Arrange: an engine claim whose process crashed, on the key the transactional call runs under
    const f = fixture(join(dir, 'transactional.db'));
    const key = f.transactional.storageKeyFor('k');
    expect(await f.store.claim(key, { fingerprint: '', leaseMs: LEASE_MS })).toMatchObject({
      claimed: true,
    });
    const holder = await f.holdLock();
    // Act
    const outcome = f.transactional.runInTransactionSync({ key: 'k' }, () => 'charged');
    await holder.done;
    // Assert
    expect(outcome).toMatchObject({ status: 'executed', value: 'charged' });
    f.close();
  });
});
