/**
 * The transactional mode across real OS processes sharing one file: duplicates wait for SQLite's write
 * lock, then find the committed record and replay, so each key's business row is written exactly once.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { migrate } from '../../../src/sqlite/index.js';
import type { StormReport } from '../../helpers/sqlite-tx-storm-child.js';
import { runChildren } from './children.js';

const dir = mkdtempSync(join(tmpdir(), 'idempotency-kit-sqlite-tx-storm-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const PROCESSES = 4;
const KEYS = 60;

describe('sqliteTransactional across processes', () => {
  it(`writes each key's business row once with ${PROCESSES} processes × the same ${KEYS} keys; every other call replays`, async () => {
    // Arrange
    const file = join(dir, 'storm.db');
    const db = new Database(file);
    db.pragma('journal_mode = WAL');
    db.exec(
      'CREATE TABLE payments (id INTEGER PRIMARY KEY, idempotency_key TEXT NOT NULL, pid INTEGER NOT NULL, token INTEGER NOT NULL)',
    );
    migrate(db);
    const prefix = `storm-${process.pid}-${Date.now()}`;
    // Act
    const reports = await runChildren<StormReport>(
      '../../helpers/sqlite-tx-storm-child.ts',
      PROCESSES,
      () => [file, prefix, String(KEYS)],
    );
    // Assert
    const rows = db
      .prepare('SELECT idempotency_key AS key, pid, count(*) AS n FROM payments GROUP BY key')
      .all() as { key: string; pid: number; n: number }[];
    db.close();
    expect(rows).toHaveLength(KEYS);
    expect(rows.filter((row) => row.n !== 1)).toEqual([]);
    const executedBy = new Map(rows.map((row) => [row.key, row.pid]));
    const executed = reports.flatMap((r) => r.executed.map((key) => [key, r.pid] as const));
    expect(executed).toHaveLength(KEYS);
    for (const [key, pid] of executed) expect(executedBy.get(key)).toBe(pid);
    for (const r of reports) {
      expect(r.other).toEqual([]);
      // Every replay carries the value committed by the process that executed the key.
      for (const [key, pid] of Object.entries(r.replayed)) expect(executedBy.get(key)).toBe(pid);
    }
    const replays = reports.reduce((sum, r) => sum + Object.keys(r.replayed).length, 0);
    expect(replays).toBe(PROCESSES * KEYS - KEYS);
  });
});
