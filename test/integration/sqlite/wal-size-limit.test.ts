/**
 * The `-wal` file of a file the store opens is brought back. Under continuous load from several processes
 * SQLite's automatic checkpoints rarely finish (checkpoint starvation), so the WAL grows past its usual
 * ~4 MiB: 4 processes claiming and replaying flat out made bursts of up to 240 MB, and without a
 * `journal_size_limit` the file kept its largest size for as long as a connection stayed open (a 308 MB
 * `-wal` beside a 119 MB database after 90 s). Starvation is made deterministic here by a reader in another
 * process that holds one snapshot while the store writes.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { type SqliteStore, sqliteStore } from '../../../src/sqlite/index.js';
import { WAL_CHECKPOINT_BYTES } from '../../../src/sqlite/wal-checkpoint.js';
import { WAL_SIZE_LIMIT_BYTES } from '../../../src/sqlite/wal-mode.js';

const dir = mkdtempSync(join(tmpdir(), 'idempotency-kit-sqlite-wal-size-'));
const readers: ChildProcess[] = [];
afterAll(() => {
  // A test that failed before ending its reader leaves it holding the file.
  for (const reader of readers) if (reader.exitCode === null) reader.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

// A process that opens `file`, starts a read transaction, and holds its snapshot until it is told to end.
async function startReader(file: string) {
  const child = fork(
    fileURLToPath(new URL('./snapshot-reader-child.ts', import.meta.url)),
    [file],
    {
      execArgv: ['--import', 'tsx'],
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    },
  );
  readers.push(child);
  await new Promise<void>((resolve, reject) => {
    child.once('message', () => resolve());
    child.once('exit', (code) => reject(new Error(`reader exited early with ${code}`)));
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return {
    async end() {
      child.send('end');
      await exited;
    },
  };
}

const walSize = (file: string) => statSync(`${file}-wal`).size;
const outcome = new Uint8Array(64 * 1024).fill(7);

// Claim and complete fresh keys with 64 KiB outcomes until the -wal file is over `bytes`.
async function writeUntil(store: SqliteStore, file: string, bytes: number, prefix: string) {
  for (let n = 0; walSize(file) <= bytes; n++) {
    const key = `${prefix}${n}`;
    const claim = await store.claim(key, { fingerprint: 'fp', leaseMs: 60_000 });
    if (claim.claimed) await store.complete(key, claim.token, outcome, 3_600_000);
  }
}

describe('sqlite store WAL size', () => {
  it('truncates a -wal file grown under a reader back to the limit once checkpoints catch up', async () => {
    // Arrange: the schema exists before the reader takes its snapshot, then the store writes 32 MiB of
    // outcomes the automatic checkpoints cannot copy past that snapshot.
    const file = join(dir, 'starved.db');
    const store = sqliteStore({ database: file });
    await store.claim('warm-up', { fingerprint: 'fp', leaseMs: 60_000 });
    const reader = await startReader(file);
    await writeUntil(store, file, 2 * WAL_SIZE_LIMIT_BYTES, 'k');
    await reader.end();
    // Act: the load goes on; the first commits' checkpoint now finishes, and a later write restarts the
    // WAL from its start, truncating the file.
    for (let i = 0; i < 50 && walSize(file) > WAL_SIZE_LIMIT_BYTES; i++) {
      const key = `after${i}`;
      const claim = await store.claim(key, { fingerprint: 'fp', leaseMs: 60_000 });
      if (claim.claimed) await store.complete(key, claim.token, outcome, 3_600_000);
    }
    // Assert
    expect(walSize(file)).toBeLessThanOrEqual(WAL_SIZE_LIMIT_BYTES);
    await store.close();
  });

  it('empties a -wal file grown past the checkpoint size with a checkpoint of its own, between writes', async () => {
    // Arrange: the WAL grows past WAL_CHECKPOINT_BYTES while a reader holds it back; the checkpoints the
    // store tries meanwhile wait a few ms for that reader each, give up, and space out.
    const file = join(dir, 'checkpointed.db');
    const store = sqliteStore({ database: file });
    await store.claim('warm-up', { fingerprint: 'fp', leaseMs: 60_000 });
    const reader = await startReader(file);
    await writeUntil(store, file, WAL_CHECKPOINT_BYTES, 'k');
    const grown = walSize(file);
    await reader.end();
    // Act: reads only. SQLite's own checkpoints run on commits, and a WAL restarts (and is truncated to
    // journal_size_limit) only at a write, so without the store's checkpoint the file would stay as it is.
    for (let i = 0; i < 2000 && walSize(file) > WAL_SIZE_LIMIT_BYTES; i++) await store.get('k0');
    // Assert
    expect(grown).toBeGreaterThan(WAL_CHECKPOINT_BYTES);
    expect(walSize(file)).toBeLessThanOrEqual(WAL_SIZE_LIMIT_BYTES);
    expect((await store.get('k0'))?.status).toBe('completed');
    await store.close();
  });

  it('checkpoints the -wal file of a store opened with a relative path after the process changed directory', async () => {
    // Arrange: opened as 'relative.db' from `dir`, then the process changes directory (a CLI, a test
    // runner) and the WAL grows past the checkpoint size under a reader.
    const cwd = process.cwd();
    const file = join(dir, 'relative.db');
    let store: SqliteStore;
    process.chdir(dir);
    try {
      store = sqliteStore({ database: 'relative.db' });
    } finally {
      process.chdir(cwd);
    }
    await store.claim('warm-up', { fingerprint: 'fp', leaseMs: 60_000 });
    const reader = await startReader(file);
    await writeUntil(store, file, WAL_CHECKPOINT_BYTES, 'k');
    await reader.end();
    // Act: reads go on, as in the test above.
    for (let i = 0; i < 2000 && walSize(file) > WAL_SIZE_LIMIT_BYTES; i++) await store.get('k0');
    // Assert: before, the store looked for relative.db-wal in the new working directory, and never
    // checkpointed.
    expect(walSize(file)).toBeLessThanOrEqual(WAL_SIZE_LIMIT_BYTES);
    await store.close();
  });
});
