/**
 * WAL on a file the store opens: switching a connection to it (the one step of opening a file that
 * SQLite's busy timeout does not cover), and bounding the size the `-wal` file keeps.
 * @module
 */
import { driverCode, type SqliteDatabase } from './client.js';

// How long to sleep between tries: short at first (the usual holder is another process's migration or
// claim, a few ms), then capped so a long writer is polled, not spun on.
const FIRST_PAUSE_MS = 2;
const MAX_PAUSE_MS = 50;

// One shared cell to block on: Atomics.wait is the only synchronous sleep Node has, and opening the store
// is synchronous (as SQLite's own busy handler is).
const sleeper = new Int32Array(new SharedArrayBuffer(4));

/**
 * Put `db` in WAL mode, retrying for up to `busyTimeoutMs` while another connection holds the write lock.
 *
 * Why not the pragma alone: the switch needs an exclusive lock, and when another process is inside a write
 * transaction SQLite answers `SQLITE_BUSY` at once instead of calling the busy handler (it would deadlock
 * otherwise, since this connection already holds a shared lock). Several processes opening one fresh file
 * together, each running its migration, hit exactly that, so the store retries here, within the same
 * budget the busy timeout gives every other statement. Any other error, or the last `SQLITE_BUSY`, is
 * thrown.
 */
export function enableWal(db: SqliteDatabase, busyTimeoutMs: number): void {
  // A monotonic clock: the budget is time spent waiting, and the wall clock can step back (NTP, a VM
  // resuming) by more than the whole budget, which would keep this loop blocking the process for that long.
  const deadline = performance.now() + busyTimeoutMs;
  let pause = FIRST_PAUSE_MS;
  for (;;) {
    try {
      db.pragma('journal_mode = WAL');
      return;
    } catch (error) {
      if (driverCode(error) !== 'SQLITE_BUSY' || performance.now() + pause > deadline) throw error;
    }
    Atomics.wait(sleeper, 0, 0, pause);
    pause = Math.min(pause * 2, MAX_PAUSE_MS);
  }
}

/**
 * The size, in bytes, that the `-wal` file of a file the store opens is truncated back to whenever SQLite
 * restarts the WAL from its start (after a checkpoint that copied all of it): 16 MiB, four times what the
 * automatic checkpoint (every 1,000 pages) lets it reach when nothing holds it back.
 */
export const WAL_SIZE_LIMIT_BYTES = 16 * 1024 * 1024;

/**
 * Set `journal_size_limit` on `db` to {@link WAL_SIZE_LIMIT_BYTES}.
 *
 * Why: under continuous load from several processes, readers keep the automatic checkpoints (PASSIVE)
 * from reaching the end of the WAL for a while (checkpoint starvation), and the WAL grows meanwhile, by
 * tens of MB a second at thousands of commits a second. SQLite reuses the file from its start once a
 * checkpoint catches up, but without a limit it never gives the space back: the file kept its largest size
 * for as long as a connection stayed open (a 308 MB `-wal` beside a 119 MB database after 90 s of 4
 * processes). With the limit the file returns to 16 MiB at each restart; below it nothing is truncated, so
 * the usual load costs nothing.
 */
export function limitWalSize(db: SqliteDatabase): void {
  db.pragma(`journal_size_limit = ${WAL_SIZE_LIMIT_BYTES}`);
}
