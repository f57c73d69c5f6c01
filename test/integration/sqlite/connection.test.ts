/**
 * Who owns the connection, what the store sets on it, and how driver failures surface: a busy lock past
 * the timeout and a closed database both reject with StoreUnavailableError carrying the driver's error.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { isStoreUnavailableError, type StoreUnavailableError } from '../../../src/index.js';
import { sqliteStore } from '../../../src/sqlite/index.js';

const dir = mkdtempSync(join(tmpdir(), 'idempotency-kit-sqlite-connection-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let files = 0;
const freshFile = () => join(dir, `db-${++files}.db`);
const claimOptions = { fingerprint: 'fp', leaseMs: 60_000 };

async function rejection(promise: Promise<unknown>): Promise<StoreUnavailableError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(
    isStoreUnavailableError(error),
    `expected StoreUnavailableError, got ${String(error)}`,
  ).toBe(true);
  return error as StoreUnavailableError;
}

describe('sqlite store connection', () => {
  it('opens a path with WAL, the busy timeout and synchronous=NORMAL, and closes it in close()', async () => {
    // Arrange
    const store = sqliteStore({ database: freshFile(), busyTimeoutMs: 1234 });
    const db = store.database;
    // Act
    const settings = {
      journal: db.pragma('journal_mode', { simple: true }),
      busy: db.pragma('busy_timeout', { simple: true }),
      synchronous: db.pragma('synchronous', { simple: true }),
    };
    await store.close();
    // Assert
    expect(settings).toEqual({ journal: 'wal', busy: 1234, synchronous: 1 });
    expect(db.open).toBe(false);
  });

  it('sets synchronous=FULL when asked', async () => {
    // Arrange
    const store = sqliteStore({ database: freshFile(), synchronous: 'full' });
    // Act
    const synchronous = store.database.pragma('synchronous', { simple: true });
    await store.close();
    // Assert
    expect(synchronous).toBe(2);
  });

  it('never closes, nor reconfigures, a Database the user opened', async () => {
    // Arrange
    const db = new Database(freshFile(), { timeout: 777 });
    const store = sqliteStore({ database: db });
    const claim = await store.claim('k', claimOptions);
    // Act
    await store.close();
    // Assert
    expect(claim.claimed).toBe(true);
    expect(db.open).toBe(true);
    expect(db.pragma('journal_mode', { simple: true })).toBe('delete');
    expect(db.pragma('busy_timeout', { simple: true })).toBe(777);
    expect(db.prepare('SELECT count(*) AS n FROM idempotency_records').get()).toEqual({ n: 1 });
    db.close();
  });

  it('rejects calls after close() with StoreUnavailableError', async () => {
    // Arrange
    const store = sqliteStore({ database: freshFile() });
    await store.close();
    // Act
    const error = await rejection(store.claim('k', claimOptions));
    // Assert
    expect(error.message).toMatch(/after close/);
    await store.close();
  });

  it('turns a database the user closed into StoreUnavailableError with the driver error as cause', async () => {
    // Arrange
    const db = new Database(freshFile());
    const store = sqliteStore({ database: db });
    await store.claim('warm', claimOptions);
    db.close();
    // Act
    const errors = await Promise.all([
      rejection(store.claim('k', claimOptions)),
      rejection(store.complete('warm', 1, new Uint8Array(1), 1000)),
      rejection(store.get('warm')),
      rejection(store.stats()),
    ]);
    // Assert
    for (const error of errors) {
      expect(error.cause).toBeInstanceOf(TypeError);
      expect(String((error.cause as Error).message)).toMatch(/not open/);
    }
  });

  it('turns SQLITE_BUSY past the busy timeout into StoreUnavailableError, then recovers', async () => {
    // Arrange: another connection holds the write lock.
    const file = freshFile();
    const store = sqliteStore({ database: file, busyTimeoutMs: 50 });
    const held = await store.claim('held', claimOptions);
    const other = new Database(file);
    other.exec('BEGIN IMMEDIATE');
    // Act
    const claimError = await rejection(store.claim('new-key', claimOptions));
    const completeError = await rejection(
      held.claimed
        ? store.complete('held', held.token, new Uint8Array(1), 1000)
        : Promise.resolve(),
    );
    other.exec('ROLLBACK');
    const after = await store.claim('new-key', claimOptions);
    // Assert
    for (const error of [claimError, completeError]) {
      expect((error.cause as { code?: string }).code).toBe('SQLITE_BUSY');
      expect(error.message).toMatch(/SQLITE_BUSY/);
    }
    expect(after.claimed).toBe(true);
    other.close();
    await store.close();
  });

  it('still answers replays while another process holds the write lock (WAL readers)', async () => {
    // Arrange
    const file = freshFile();
    const store = sqliteStore({ database: file, busyTimeoutMs: 50 });
    const claim = await store.claim('done', claimOptions);
    if (!claim.claimed) throw new Error('setup claim lost');
    await store.complete('done', claim.token, Buffer.from('outcome'), 60_000);
    const other = new Database(file);
    other.exec('BEGIN IMMEDIATE');
    // Act
    const replay = await store.claim('done', claimOptions);
    other.exec('ROLLBACK');
    // Assert
    expect(replay.claimed).toBe(false);
    if (!replay.claimed) expect(replay.record.status).toBe('completed');
    other.close();
    await store.close();
  });

  it('reports a missing schema (migrate: false) as StoreUnavailableError naming the table', async () => {
    // Arrange
    const store = sqliteStore({ database: freshFile(), migrate: false });
    // Act
    const error = await rejection(store.get('k'));
    // Assert
    expect(error.message).toMatch(/no such table: idempotency_records/);
    await store.close();
  });

  it('refuses bad options with InvalidOptionsError', () => {
    // Arrange / Act / Assert
    expect(() => sqliteStore({ database: freshFile(), busyTimeoutMs: -1 })).toThrow(
      /busyTimeoutMs/,
    );
    expect(() =>
      sqliteStore({ database: freshFile(), synchronous: 'off' as unknown as 'full' }),
    ).toThrow(/synchronous/);
    expect(() => sqliteStore({ database: 42 as unknown as string })).toThrow(
      expect.objectContaining({ code: 'invalid_options' }),
    );
  });

  it('fails to open a file in a missing folder with StoreUnavailableError', () => {
    // Arrange / Act / Assert
    expect(() => sqliteStore({ database: join(dir, 'missing', 'x.db') })).toThrow(
      expect.objectContaining({ code: 'store_unavailable' }),
    );
  });
});
