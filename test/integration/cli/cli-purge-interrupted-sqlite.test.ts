/**
 * A `purge` of a SQLite file stops at the first SIGINT or SIGTERM, as on PostgreSQL
 * (cli-purge-interrupted.test.ts): better-sqlite3 answers each batch synchronously, so the command must
 * still let the event loop run its signal handlers between batches, or the signal is only seen once the
 * whole table has been purged.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { migrate } from '../../../src/sqlite/index.js';
import { startCli } from '../../helpers/cli.js';

const dir = mkdtempSync(join(tmpdir(), 'ik-cli-purge-sqlite-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const EXPIRED = 100_000;
// Small batches: thousands of them, so the purge is still running when the signal comes.
const LIMIT = 5;

/** A migrated WAL file holding `EXPIRED` expired outcomes. */
function fileOfExpiredRows(name: string): string {
  const file = join(dir, name);
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  migrate(db);
  const insert = db.prepare(
    `INSERT INTO idempotency_records
       (key, status, fingerprint, token, attempt, created_at, expires_at, completed_at, outcome)
     VALUES (?, 'completed', 'f', 1, 1, 0, 1, 0, x'00')`,
  );
  db.transaction(() => {
    for (let i = 0; i < EXPIRED; i++) insert.run(`key-${i}`);
  })();
  db.close();
  return file;
}

/** Rows left in the file's records table. */
function left(file: string): number {
  const db = new Database(file, { readonly: true });
  try {
    return (db.prepare('SELECT count(*) AS n FROM idempotency_records').get() as { n: number }).n;
  } finally {
    db.close();
  }
}

describe('idempotency-kit purge of a SQLite file stopped by a signal', () => {
  it.each([
    ['SIGINT', 130],
    ['SIGTERM', 143],
  ] as const)('%s: prints what it deleted and exits %i', async (signal, exitCode) => {
    // Arrange
    const file = fileOfExpiredRows(`${signal}.db`);
    const { child, exited } = startCli(['purge', '--sqlite', file, '--limit', String(LIMIT)]);
    // Act: signal once the purge is under way
    while (left(file) === EXPIRED) await new Promise((r) => setTimeout(r, 20));
    child.kill(signal);
    const { code, stdout, stderr } = await exited;
    // Assert: it stopped (rows are left), and the count printed is what is gone
    const purged = EXPIRED - left(file);
    expect(stderr).toBe('');
    expect(code).toBe(exitCode);
    expect(purged).toBeLessThan(EXPIRED);
    expect(stdout).toBe(
      `purged ${purged} expired records in ${purged / LIMIT} batches; stopped by ${signal}\n`,
    );
  });
});
