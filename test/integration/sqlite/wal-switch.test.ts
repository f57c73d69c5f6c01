/**
 * Opening a file while another process writes to it: the switch to WAL is the one step SQLite's busy
 * timeout does not cover (it answers SQLITE_BUSY at once), so the store retries it within the timeout.
 */
import { fork } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { sqliteStore } from '../../../src/sqlite/index.js';

const dir = mkdtempSync(join(tmpdir(), 'idempotency-kit-sqlite-wal-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
afterEach(() => vi.restoreAllMocks());

// A rollback-journal file whose write lock another process holds for `holdMs`; resolves once it is held.
async function fileLockedByAnotherWriter(name: string, holdMs: number): Promise<string> {
  const file = join(dir, name);
  const setup = new Database(file);
  setup.exec('CREATE TABLE filler (n INTEGER)');
  setup.close();
  const child = fork(
    fileURLToPath(new URL('./hold-write-child.ts', import.meta.url)),
    [file, String(holdMs)],
    { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] },
  );
  await new Promise<void>((resolve, reject) => {
    child.once('message', () => resolve());
    child.once('exit', (code) => reject(new Error(`holder exited early with ${code}`)));
  });
  return file;
}

describe('sqlite store opening a file another process is writing', () => {
  it('waits for the writer within the busy timeout, then switches to WAL and claims', async () => {
    // Arrange
    const file = await fileLockedByAnotherWriter('wait.db', 300);
    // Act
    const store = sqliteStore({ database: file, busyTimeoutMs: 5000 });
    const claim = await store.claim('key', { fingerprint: 'fp', leaseMs: 60_000 });
    // Assert
    expect(store.database.pragma('journal_mode', { simple: true })).toBe('wal');
    expect(claim.claimed).toBe(true);
    await store.close();
  });

  it('gives up with store_unavailable once the busy timeout is spent', async () => {
    // Arrange
    const file = await fileLockedByAnotherWriter('give-up.db', 2000);
    // Act
    const started = Date.now();
    const open = () => sqliteStore({ database: file, busyTimeoutMs: 150 });
    // Assert
    expect(open).toThrow(
      expect.objectContaining({
        code: 'store_unavailable',
        message: expect.stringMatching(/BUSY/),
      }),
    );
    expect(Date.now() - started).toBeGreaterThanOrEqual(100);
    expect(Date.now() - started).toBeLessThan(1500);
  });

  it('gives up once the busy timeout is spent even if the wall clock steps back meanwhile', async () => {
    // Arrange: NTP steps the clock back an hour as soon as the store has read it once
    const file = await fileLockedByAnotherWriter('clock-back.db', 2000);
    const wall = Date.now.bind(Date);
    let reads = 0;
    vi.spyOn(Date, 'now').mockImplementation(() => wall() - (reads++ === 0 ? 0 : 3_600_000));
    // Act
    const started = performance.now();
    const open = () => sqliteStore({ database: file, busyTimeoutMs: 150 });
    // Assert: the budget is time spent waiting, not a wall-clock instant
    expect(open).toThrow(expect.objectContaining({ code: 'store_unavailable' }));
    expect(performance.now() - started).toBeLessThan(1500);
  });
});
