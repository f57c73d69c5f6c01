/**
 * Migrations of the SQLite store: idempotent, safe from several processes at once, per table, and an
 * existing file upgrades in place.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { migrate, sqliteStore } from '../../../src/sqlite/index.js';
import { migrations } from '../../../src/sqlite/migrations.gen.js';
import { ManualClock } from '../../helpers/clock.js';
import { runChildren } from './children.js';

const dir = mkdtempSync(join(tmpdir(), 'idempotency-kit-sqlite-migrate-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('sqlite migrate', () => {
  it('applies every migration once and nothing on a second run', () => {
    // Arrange
    const db = new Database(join(dir, 'twice.db'));
    // Act
    const first = migrate(db);
    const second = migrate(db);
    // Assert
    expect(first.applied).toEqual(['0001_records', '0002_reservations_and_steps']);
    expect(second.applied).toEqual([]);
    const rows = db.prepare('SELECT id, name FROM idempotency_records_migrations').all();
    expect(rows).toEqual([
      { id: 1, name: '0001_records' },
      { id: 2, name: '0002_reservations_and_steps' },
    ]);
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
    expect(reports.flatMap((r) => r.applied)).toEqual([
      '0001_records',
      '0002_reservations_and_steps',
    ]);
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

  it('upgrades a file at 0001 in place: its rows are kept, reserve nothing beyond their lease and hold no steps', async () => {
    // Arrange: a file migrated by the previous release (0001 only), holding a live claim, a dead one and a
    // completed record.
    const db = new Database(join(dir, 'upgrade.db'));
    const v1 = migrations.find((m) => m.id === 1);
    if (v1 === undefined) throw new Error('0001 missing');
    db.exec(
      'CREATE TABLE idempotency_records_migrations (id INTEGER NOT NULL PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)',
    );
    db.exec(v1.sql);
    db.prepare('INSERT INTO idempotency_records_migrations VALUES (1, ?, 0)').run(v1.name);
    const clock = new ManualClock();
    const now = clock.now();
    const insert = db.prepare(
      `INSERT INTO idempotency_records (key, status, fingerprint, token, attempt, created_at, expires_at,
         completed_at, outcome) VALUES (?, ?, 'fp-a', ?, 1, ?, ?, ?, ?)`,
    );
    insert.run('live', 'in_progress', 10, now, now + 60_000, null, null);
    insert.run('dead', 'in_progress', 11, now - 1_000, now - 1, null, null);
    insert.run('done', 'completed', 12, now, now + 60_000, now, Buffer.from('ok'));
    db.prepare('UPDATE idempotency_records_meta SET last_token = 12').run();
    // Act
    const result = migrate(db);
    const store = sqliteStore({ database: db, clock });
    // Assert
    expect(result.applied).toEqual(['0002_reservations_and_steps']);
    expect(
      db.prepare('SELECT key, reserved_until, steps FROM idempotency_records ORDER BY key').all(),
    ).toEqual([
      { key: 'dead', reserved_until: null, steps: null },
      { key: 'done', reserved_until: null, steps: null },
      { key: 'live', reserved_until: null, steps: null },
    ]);
    const other = { fingerprint: 'fp-b', leaseMs: 60_000, reserveMs: 86_400_000 };
    expect(await store.claim('live', other)).toMatchObject({ claimed: false });
    expect(await store.claim('done', other)).toMatchObject({ claimed: false });
    // A dead lease of before the upgrade has no reservation: any request takes it over, as before.
    const takeover = await store.claim('dead', other);
    expect(takeover).toMatchObject({ claimed: true, attempt: 2 });
    // The holder of a row of before the upgrade has no steps, and can record some.
    if (!takeover.claimed) throw new Error('unreachable');
    expect(await store.loadSteps('dead', takeover.token)).toEqual({});
    expect(await store.saveStep('dead', takeover.token, 'charge', Buffer.from('ch_1'))).toBe(true);
    expect(await store.loadSteps('dead', takeover.token)).toEqual({
      charge: new Uint8Array(Buffer.from('ch_1')),
    });
    await store.close();
    db.close();
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
