/**
 * `sqliteStore` and `migrate` options are checked, never coerced: a value of the wrong type (a string from
 * an environment variable or a configuration file) is refused when the store is created, naming the option
 * and showing the value with its type; durations take the engine's strings (`'5s'`).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { migrate, type SqliteStoreOptions, sqliteStore } from '../../../src/sqlite/index.js';

const dir = mkdtempSync(join(tmpdir(), 'idempotency-kit-sqlite-options-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const refusal = (message: RegExp) =>
  expect.objectContaining({ code: 'invalid_options', message: expect.stringMatching(message) });

const tables = (db: Database.Database) =>
  (
    db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all() as { name: string }[]
  ).map((row) => row.name);

describe('sqliteStore options', () => {
  it.each([
    [{ busyTimeoutMs: '5000' }, /^sqliteStore: busyTimeoutMs: .* got "5000"$/],
    [{ busyTimeoutMs: -1 }, /^sqliteStore: busyTimeoutMs: .*non-negative whole .* got -1$/],
    [{ busyTimeoutMs: 1.5 }, /^sqliteStore: busyTimeoutMs: .* got 1.5$/],
    [
      { busyTimeoutMs: 2 ** 31 },
      /^sqliteStore: busyTimeoutMs: .*at most 2147483647 ms.* got 2147483648$/,
    ],
    [{ synchronous: 'FULL' }, /^sqliteStore: synchronous must be 'full' or 'normal', got "FULL"$/],
    [{ migrate: 'false' }, /^sqliteStore: migrate: expected true or false, got "false"$/],
    [{ table: 5 }, /^sqliteStore: table: expected a string, got 5$/],
    [
      { clock: 'system' },
      /^sqliteStore: clock must be an object with a now\(\) method, got "system"$/,
    ],
    [{ busyTimeout: 5000 }, /^sqliteStore: unknown field "busyTimeout"; the fields are database, /],
  ])('refuses %o when created, showing the value with its type', (bad, message) => {
    // Arrange
    const db = new Database(':memory:');
    // Act / Assert
    expect(() => sqliteStore({ database: db, ...(bad as object) } as SqliteStoreOptions)).toThrow(
      refusal(message),
    );
    // Nothing was migrated: the options are checked before the schema is touched.
    expect(tables(db)).toEqual([]);
    db.close();
  });

  it('does not migrate when migrate is false, and migrates when it is absent or null', () => {
    // Arrange
    const off = new Database(':memory:');
    const unset = new Database(':memory:');
    // Act
    sqliteStore({ database: off, migrate: false });
    sqliteStore({ database: unset, migrate: null as never });
    // Assert
    expect(tables(off)).toEqual([]);
    expect(tables(unset)).toContain('idempotency_records');
  });

  it("takes a busy timeout as a duration string ('2s') on a file it opens", async () => {
    // Act
    const store = sqliteStore({ database: join(dir, 'busy.db'), busyTimeoutMs: '2s' });
    // Assert
    expect(store.database.pragma('busy_timeout', { simple: true })).toBe(2000);
    await store.close();
  });

  it("takes 0 (no wait), null (the default) and 'full' as before", async () => {
    // Act
    const none = sqliteStore({ database: join(dir, 'zero.db'), busyTimeoutMs: 0 });
    const unset = sqliteStore({
      database: join(dir, 'null.db'),
      busyTimeoutMs: null as never,
      synchronous: 'full',
    });
    // Assert
    expect(none.database.pragma('busy_timeout', { simple: true })).toBe(0);
    expect(unset.database.pragma('busy_timeout', { simple: true })).toBe(5000);
    expect(unset.database.pragma('synchronous', { simple: true })).toBe(2); // FULL
    await none.close();
    await unset.close();
  });
});

describe('migrate options', () => {
  it('refuses a busy timeout given as a string without a unit, before opening the file', () => {
    // Arrange
    const file = join(dir, 'migrate.db');
    // Act / Assert
    expect(() => migrate(file, { busyTimeoutMs: '5000' as never })).toThrow(
      refusal(/^migrate: busyTimeoutMs: .* got "5000"$/),
    );
    expect(() => migrate(file, { table: 5 as never })).toThrow(
      refusal(/^migrate: table: expected a string, got 5$/),
    );
  });
});
