/**
 * `migrate()` on a SQLite table that a newer release migrated further than this one knows: reported
 * (`schemaVersion`, `warning`) and left as it is, as the PostgreSQL store's `migrate()` does, where it used to
 * answer `{ applied: [] }` like an up-to-date table. The store keeps working on it (a rolling deploy).
 */
import Database from 'better-sqlite3';
import { describe, expect, it, vi } from 'vitest';
import {
  migrate,
  type SqliteStoreWarning,
  sqliteStore,
  sqliteTransactional,
} from '../../../src/sqlite/index.js';
import { migrations } from '../../../src/sqlite/migrations.gen.js';

const VERSION = migrations[migrations.length - 1]!.id;

// A table migrated by this release, then by a newer one (`ahead` migrations past this release's last).
function migratedAhead(ahead: number, table = 'idempotency_records') {
  const db = new Database(':memory:');
  migrate(db, { table });
  const insert = db.prepare(
    `INSERT INTO ${table}_migrations (id, name, applied_at) VALUES (?, ?, 0)`,
  );
  for (let i = 1; i <= ahead; i++) insert.run(VERSION + i, `000${VERSION + i}_from_the_future`);
  return db;
}

describe('sqlite migrate on a table ahead of this release', () => {
  it('reports the version this release knows, and nothing more on a current table', () => {
    // Arrange
    const db = new Database(':memory:');
    // Act
    const fresh = migrate(db);
    const again = migrate(db);
    // Assert
    expect(fresh).toEqual({ applied: migrations.map((m) => m.name), version: VERSION });
    expect(again).toEqual({ applied: [], version: VERSION });
  });

  it('reports the newest recorded migration and names the newer ones, changing nothing', () => {
    // Arrange
    const db = migratedAhead(2, 'orders');
    const before = db.prepare('SELECT id, name FROM orders_migrations ORDER BY id').all();
    // Act
    const result = migrate(db, { table: 'orders' });
    // Assert
    expect(result).toMatchObject({ applied: [], version: VERSION, schemaVersion: VERSION + 2 });
    expect(result.warning).toBe(
      `orders is at version ${VERSION + 2}, newer than this release knows (${VERSION}): a newer release ` +
        `applied 000${VERSION + 1}_from_the_future, 000${VERSION + 2}_from_the_future. Nothing was ` +
        'applied or undone; this release runs on it as long as those migrations keep older code working ' +
        '(see their release notes)',
    );
    expect(db.prepare('SELECT id, name FROM orders_migrations ORDER BY id').all()).toEqual(before);
  });

  it('lets a store be created on it and claim', async () => {
    // Arrange
    const db = migratedAhead(1);
    // Act
    const store = sqliteStore({ database: db, onWarning: () => undefined });
    const claim = await store.claim('k', { fingerprint: 'fp', leaseMs: 1000 });
    // Assert
    expect(claim.claimed).toBe(true);
  });

  it("passes the store's own migration warning to onWarning, where it used to be dropped", () => {
    // Arrange
    const db = migratedAhead(1);
    const warnings: SqliteStoreWarning[] = [];
    // Act
    sqliteStore({ database: db, onWarning: (warning) => warnings.push(warning) });
    sqliteTransactional({ database: db, onWarning: (warning) => warnings.push(warning) });
    // Assert
    const expected = {
      code: 'schema_ahead',
      version: VERSION,
      schemaVersion: VERSION + 1,
      message: migrate(db).warning,
    };
    expect(expected.message).toMatch(/^idempotency_records is at version \d+, newer than this/);
    expect(warnings).toEqual([expected, expected]);
  });

  it('logs it with console.warn by default, and says nothing on a current table', () => {
    // Arrange
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => undefined);
    try {
      // Act
      sqliteStore({ database: new Database(':memory:') });
      sqliteStore({ database: migratedAhead(1) });
      // Assert
      expect(warn).toHaveBeenCalledTimes(1);
      expect(warn.mock.calls[0]?.[0]).toMatch(
        /^idempotency-kit: idempotency_records is at version \d+, newer than this release knows/,
      );
    } finally {
      warn.mockRestore();
    }
  });

  it('refuses an onWarning that is not a function', () => {
    expect(() => sqliteStore({ database: ':memory:', onWarning: 'log' as never })).toThrow(
      /^sqliteStore: onWarning: expected a function, got/,
    );
  });
});
