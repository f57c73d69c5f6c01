/**
 * The SQLite transactional mode when the handler tries to end the transaction itself on the connection it
 * is given: a ROLLBACK followed by more writes, a COMMIT followed by a failure, a COMMIT hidden in a string
 * of several statements, a ROLLBACK in beforeCommit. Savepoints and nested db.transaction() keep working,
 * and the connection runs any statement outside a run. On a real WAL file.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { isInvalidOptionsError, RecordStatus } from '../../../src/index.js';
import {
  type SqliteDatabase,
  type SqliteTransactionContext,
  sqliteStore,
  sqliteTransactional,
} from '../../../src/sqlite/index.js';

const dir = mkdtempSync(join(tmpdir(), 'idempotency-kit-sqlite-own-commit-'));
const open: Database.Database[] = [];
afterAll(() => {
  for (const db of open) if (db.open) db.close();
  rmSync(dir, { recursive: true, force: true });
});

let files = 0;
/** A fresh WAL file with a charges table and the records table. */
function fixture() {
  const db = new Database(join(dir, `own-${++files}.db`), { timeout: 5_000 });
  open.push(db);
  db.pragma('journal_mode = WAL');
  db.exec('CREATE TABLE charges (id INTEGER PRIMARY KEY, ref TEXT NOT NULL)');
  const transactional = sqliteTransactional({ database: db });
  const charge = (ref: string) => db.prepare('INSERT INTO charges (ref) VALUES (?)').run(ref);
  const charges = (ref: string) =>
    (db.prepare('SELECT count(*) AS n FROM charges WHERE ref = ?').get(ref) as { n: number }).n;
  return { db, transactional, charge, charges };
}

async function caught(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => {
      throw new Error('expected a rejection');
    },
    (error: unknown) => error,
  );
}

describe('sqliteTransactional: a handler that ends the transaction itself', () => {
  it('refuses a ROLLBACK whose later writes would commit without a record (a second charge on retry)', async () => {
    // Arrange
    const { transactional, charge, charges } = fixture();
    const handler = (tx: SqliteTransactionContext) => {
      try {
        tx.database.exec('ROLLBACK'); // "start over", ignoring a complaint
      } catch {}
      charge('rollback');
      return 'charged';
    };
    // Act
    const first = await transactional.runInTransaction({ key: 'rollback' }, handler);
    const second = await transactional.runInTransaction({ key: 'rollback' }, handler);
    // Assert: the ROLLBACK was not run, so the charge and its record committed together, once.
    expect(first.status).toBe('executed');
    expect(second.status).toBe('replayed');
    expect(charges('rollback')).toBe(1);
  });

  it('refuses a COMMIT followed by a failure: the key is not left in progress for an hour', async () => {
    // Arrange
    const { transactional, charge, charges } = fixture();
    // Act: the handler swallows nothing; its COMMIT is refused, so its own error is the refusal.
    const failed = await caught(
      transactional.runInTransaction({ key: 'commit-throw' }, (tx) => {
        charge('commit-throw');
        tx.database.prepare('  /* done */ COMMIT;').run({});
        throw new Error('card declined');
      }),
    );
    const retry = await transactional.runInTransaction({ key: 'commit-throw' }, () => 'second');
    // Assert
    expect(isInvalidOptionsError(failed)).toBe(true);
    expect(charges('commit-throw')).toBe(0);
    expect(retry.status).toBe('executed');
  });

  it('fails as the handler, not as a store outage, on a COMMIT inside a string of several statements', async () => {
    // Arrange
    const { db, transactional, charges } = fixture();
    const store = sqliteStore({ database: db });
    // Act
    const failed = await caught(
      transactional.runInTransaction({ key: 'multi' }, (tx) => {
        tx.database.exec("INSERT INTO charges (ref) VALUES ('multi'); COMMIT");
        return 'charged';
      }),
    );
    const retry = await transactional.runInTransaction({ key: 'multi' }, () => 'again');
    // Assert: an error that does not invite a retry "that will not run twice"; the charge that did commit
    // is not made a second time.
    expect(isInvalidOptionsError(failed)).toBe(true);
    expect(charges('multi')).toBe(1);
    expect(retry.status).toBe('in_progress');
    expect((await store.get(transactional.storageKeyFor('multi')))?.status).toBe(
      RecordStatus.InProgress,
    );
  });

  it('refuses a ROLLBACK in beforeCommit: nothing commits, and the key stays free', async () => {
    // Arrange
    const { transactional, charge, charges } = fixture();
    // Act
    const failed = await caught(
      transactional.runInTransaction(
        { key: 'before' },
        () => {
          charge('before');
          return 'charged';
        },
        { beforeCommit: (tx) => tx.database.exec('rollback transaction') },
      ),
    );
    // Assert
    expect(isInvalidOptionsError(failed)).toBe(true);
    expect(charges('before')).toBe(0);
    expect((await transactional.runInTransaction({ key: 'before' }, () => 'next')).status).toBe(
      'executed',
    );
  });

  it('still lets the handler use savepoints and nested db.transaction(), and runs any statement outside a run', async () => {
    // Arrange
    const { db, transactional, charge, charges } = fixture();
    let kept: SqliteDatabase['exec'] | undefined;
    // Act
    const outcome = await transactional.runInTransaction({ key: 'savepoint' }, (tx) => {
      charge('kept');
      tx.database.exec('SAVEPOINT attempt');
      charge('undone');
      tx.database.exec('ROLLBACK TO SAVEPOINT attempt');
      tx.database.prepare('ROLLBACK TRANSACTION TO attempt').run({});
      tx.database.exec('RELEASE attempt');
      tx.database.transaction(() => charge('nested'))();
      kept = tx.database.exec;
      return 'ok';
    });
    // Assert
    expect(outcome.status).toBe('executed');
    expect([charges('kept'), charges('undone'), charges('nested')]).toEqual([1, 0, 1]);
    // Outside a run, and through a method the handler kept, everything passes.
    db.exec('BEGIN');
    kept?.call(db, 'ROLLBACK');
    expect(db.inTransaction).toBe(false);
  });
});
