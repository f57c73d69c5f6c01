/**
 * The CLI works on a SQLite file as it finds it: `stats`, `inspect`, `list`, `health` and `purge` never
 * switch a rollback-journal file to WAL. WAL is a property of the file, kept by every later connection,
 * and its switch is a write, which a file the operator may only read refuses: an admin command must
 * neither change how the application's file is journaled nor fail on a file it could have read.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { migrate } from '../../../src/sqlite/index.js';
import { bundledCli as cli } from '../../helpers/bundled-cli.js';

const dir = mkdtempSync(join(tmpdir(), 'ik-cli-journal-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A migrated file in rollback-journal mode (SQLite's default, which the application chose). */
function rollbackJournalFile(name: string): string {
  const file = join(dir, name);
  const db = new Database(file);
  db.pragma('journal_mode = DELETE');
  migrate(db);
  db.close();
  return file;
}

function journalMode(file: string): unknown {
  const db = new Database(file, { readonly: true });
  try {
    return db.pragma('journal_mode', { simple: true });
  } finally {
    db.close();
  }
}

describe('idempotency-kit on a rollback-journal SQLite file', () => {
  it.each([
    [['stats']],
    [['inspect', 'f'.repeat(64)]],
    [['list', '--crashed']],
    [['health']],
    [['purge']],
  ])('%j leaves the file in its journal mode', async (command) => {
    // Arrange
    const file = rollbackJournalFile(`${command[0]}.db`);
    // Act
    const run = await cli([...command, '--sqlite', file]);
    // Assert
    expect(run).toMatchObject({ code: 0, stderr: '' });
    expect(journalMode(file)).toBe('delete');
  });
});
