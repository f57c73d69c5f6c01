/**
 * Bringing back a `-wal` file that checkpoint starvation let grow: a checkpoint that waits for the writers
 * and readers, tried from time to time by each store on a file it opened.
 * @module
 */
import { statSync } from 'node:fs';
import { resolve } from 'node:path';
import type { SqliteDatabase } from './client.js';
import { WAL_SIZE_LIMIT_BYTES } from './wal-mode.js';

/** The `-wal` size past which the store runs a checkpoint of its own: four times the size limit, 64 MiB. */
export const WAL_CHECKPOINT_BYTES = 4 * WAL_SIZE_LIMIT_BYTES;

// Store calls between two looks at the -wal file's size (one stat each): at thousands of commits a second
// the WAL grows by about 1 MiB per 100 calls.
const CALLS_PER_LOOK = 100;
// After a look whose checkpoint could not finish, the next look comes twice as many calls later, up to this:
// a reader that stays (a report, a backup) holds every checkpoint back, and each try waits for it.
const MAX_CALLS_PER_LOOK = 25_600;
// How long one try waits (the busy handler) for the writer and for readers of older snapshots. The readers
// of this store end within microseconds; a long reader must not block this process's event loop for the
// whole busy timeout.
const TRY_WAIT_MS = 10;
// Tries per look, and the pause between them: another process's automatic checkpoint holds the checkpoint
// lock now and then, and SQLite answers that with busy at once, without its busy handler.
const TRIES = 5;
const PAUSE_MS = 2;

const sleeper = new Int32Array(new SharedArrayBuffer(4));

/** The first row of `PRAGMA wal_checkpoint`. */
interface CheckpointRow {
  /** 1 when the checkpoint could not finish (a writer, a reader or another checkpoint held it back). */
  busy: number;
}

/**
 * A function to call after each store operation on `db`, a file the store opened as `filename` with a busy
 * timeout of `busyTimeoutMs`. Every {@link CALLS_PER_LOOK} calls it looks at the `-wal` file, and past
 * {@link WAL_CHECKPOINT_BYTES} runs `PRAGMA wal_checkpoint(TRUNCATE)`, which copies the whole WAL into the
 * file and empties it. A look waits for others at most about 60 ms (five tries of 10 ms), plus the copy
 * itself, on the event loop; after one that could not finish the looks space out (up to every
 * {@link MAX_CALLS_PER_LOOK} calls).
 *
 * Why: SQLite's automatic checkpoint (PASSIVE, every 1,000 pages) never waits, and under continuous writes
 * from several processes it rarely finishes: each one copies what was there when it started, more commits
 * land meanwhile, and the WAL restarts from its start only after a checkpoint that left nothing behind.
 * 4 processes claiming and replaying flat out grew the WAL by bursts of up to 240 MB, which
 * `journal_size_limit` only gives back after the burst. A TRUNCATE checkpoint makes new writers wait (their
 * busy handler) while it runs, so it finishes; it kept the `-wal` file under 85 MB in the same runs, with no
 * measurable cost in throughput. Failures are ignored: the operation that called it has committed already,
 * and a later look tries again.
 */
export function walCheckpointer(
  db: SqliteDatabase,
  filename: string,
  busyTimeoutMs: number,
): () => void {
  let calls = 0;
  let callsPerLook = CALLS_PER_LOOK;
  // Resolved now, as SQLite resolved it when it opened the file: a relative path looked up at each look
  // followed the process's working directory, and after a `process.chdir()` the store looked at a -wal
  // file that did not exist and never checkpointed again (the WAL grew unbounded under starvation).
  const walFile = resolve(`${filename}-wal`);
  return () => {
    if (++calls < callsPerLook) return;
    calls = 0;
    if (walSize(walFile) <= WAL_CHECKPOINT_BYTES) return;
    callsPerLook = checkpoint(db, busyTimeoutMs)
      ? CALLS_PER_LOOK
      : Math.min(callsPerLook * 2, MAX_CALLS_PER_LOOK);
  };
}

// One look's TRUNCATE checkpoint, tried a few times with a short busy timeout: whether it finished.
function checkpoint(db: SqliteDatabase, busyTimeoutMs: number): boolean {
  try {
    db.pragma(`busy_timeout = ${Math.min(TRY_WAIT_MS, busyTimeoutMs)}`);
    for (let attempt = 1; attempt <= TRIES; attempt++) {
      const [row] = db.pragma('wal_checkpoint(TRUNCATE)') as CheckpointRow[];
      if (row?.busy === 0) return true;
      Atomics.wait(sleeper, 0, 0, PAUSE_MS);
    }
    return false;
  } catch {
    // The connection closed, or an I/O error the next write will report: nothing to do here.
    return false;
  } finally {
    if (db.open) db.pragma(`busy_timeout = ${busyTimeoutMs}`);
  }
}

// The size in bytes of the -wal file at `walFile`, 0 when there is none (a database in memory, or no write
// since it opened).
function walSize(walFile: string): number {
  try {
    return statSync(walFile).size;
  } catch {
    return 0;
  }
}
