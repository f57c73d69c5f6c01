/** Migrations of the SQLite store: idempotent, safe from several processes at once, per table. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { migrate, sqliteStore } from '../../../src/sqlite/index.js';
import { runChildren } from './children.js';

const dir = mkdtempSync(join(tmpdir(), 'idempotency-kit-sqlite-migrate-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('sqlite migrate', () => {
  it('applies 0001 once and nothing on a second run', () => {
    // Arrange
    const db = new Database(join(dir, 'twice.db'));
    // Act
    const first = migrate(db);
    const second = migrate(db);
    // Assert
    expect(first.applied).toEqual(['0001_records']);
    expect(second.applied).toEqual([]);
    const rows = db.prepare('SELECT id, name FROM idempotency_records_migrations').all();
    expect(rows).toEqual([{ id: 1, name: '0001_records' }]);
    expect(db.prepare('SELECT last_token FROM idempotency_records_meta').all()).toEqual([
      { last_token: 0 },
    ]);
    db.close();
  });

  it('lets 4 processes migrate one fresh file at once: one applies, all can claim', async () => {
    // Arrange
    const file = join(dir, 'concurrent.db');
    // Act
    const reports = await runChildren<{
      applied: string[];
      claimed: boolean;
      error: string | null;
    }>('./migrate-child.ts', 4, (i) => [file, `key-${i}`]);
    // Assert
    expect(reports.map((r) => r.error)).toEqual([null, null, null, null]);
    expect(reports.flatMap((r) => r.applied)).toEqual(['0001_records']);
    expect(reports.every((r) => r.claimed)).toBe(true);
    const db = new Database(file, { readonly: true });
    expect(db.prepare('SELECT count(*) AS n FROM idempotency_records').get()).toEqual({ n: 4 });
    db.close();
  });

  it('keeps tables apart: a custom table gets its own schema, counter and versions', async () => {
    // Arrange
    const file = join(dir, 'tables.db');
    const a = sqliteStore({ database: file });
    const b = sqliteStore({ database: file, table: 'order' });
    // Act
    const claimA = await a.claim('same-key', { fingerprint: 'fp', leaseMs: 60_000 });
    const claimB = await b.claim('same-key', { fingerprint: 'fp', leaseMs: 60_000 });
    // Assert
    expect(claimA.claimed && claimB.claimed).toBe(true);
    expect(migrate(file, { table: 'order' }).applied).toEqual([]);
    const names = (
      a.database.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all() as {
        name: string;
      }[]
    ).map((r) => r.name);
    expect(names).toEqual(
      expect.arrayContaining(['idempotency_records', 'order', 'order_meta', 'order_migrations']),
    );
    await a.close();
    await b.close();
  });

  it('fails loudly on a table name that is not a plain identifier', () => {
    // Arrange
    const db = new Database(':memory:');
    // Act / Assert
    expect(() => migrate(db, { table: 'x"; DROP TABLE y; --' })).toThrow(/table must match/);
    expect(() => sqliteStore({ database: db, table: '' })).toThrow(
      expect.objectContaining({ code: 'invalid_options' }),
    );
    db.close();
  });
});
