/**
 * The SQLite transactional mode when the handler tries to end the transaction itself on the connection it
 * is given: a ROLLBACK followed by more writes, a COMMIT followed by a failure, a ROLLBACK hidden in a
 * string of several statements, behind an empty statement or a comment, or prepared outside the handler
 * (before the guard too), a ROLLBACK in beforeCommit. Savepoints and nested db.transaction() keep working,
 * and the connection runs any statement outside a run. On a real WAL file.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { types } from 'node:util';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it, vi } from 'vitest';
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

  it('refuses a string of several statements with a ROLLBACK among them before any of them runs', async () => {
    // Arrange
    const { transactional, charge, charges } = fixture();
    const handler = (tx: SqliteTransactionContext) => {
      try {
        tx.database.exec("SELECT 1; ROLLBACK; INSERT INTO charges (ref) VALUES ('multi')");
      } catch {}
      charge('multi');
      return 'charged';
    };
    // Act
    const first = await transactional.runInTransaction({ key: 'multi' }, handler);
    const second = await transactional.runInTransaction({ key: 'multi' }, handler);
    // Assert: nothing of the string ran (its INSERT did not commit in autocommit), the handler's own
    // charge committed with the record, once.
    expect([first.status, second.status]).toEqual(['executed', 'replayed']);
    expect(charges('multi')).toBe(1);
  });

  it('refuses a COMMIT prepared before the guard too (a statement prepare never saw): nothing commits, the retry executes', async () => {
    // Arrange: prepared before sqliteTransactional was created on the connection.
    const db = new Database(join(dir, `own-${++files}.db`), { timeout: 5_000 });
    open.push(db);
    db.pragma('journal_mode = WAL');
    db.exec('CREATE TABLE charges (id INTEGER PRIMARY KEY, ref TEXT NOT NULL)');
    const early = db.prepare('COMMIT');
    const transactional = sqliteTransactional({ database: db });
    const store = sqliteStore({ database: db });
    const charges = () =>
      (db.prepare('SELECT count(*) AS n FROM charges').get() as { n: number }).n;
    // Act
    const failed = await caught(
      transactional.runInTransaction({ key: 'early' }, (tx) => {
        tx.database.exec("INSERT INTO charges (ref) VALUES ('early')");
        early.run();
        return 'charged';
      }),
    );
    const chargedByFailure = charges();
    const stored = await store.get(transactional.storageKeyFor('early'));
    const retry = await transactional.runInTransaction({ key: 'early' }, () => 'again');
    // Assert: refused as it ran (the statements' prototype checks it), so the handler failed with the
    // refusal and everything rolled back: no charge, no claim left in progress for an hour.
    expect(isInvalidOptionsError(failed)).toBe(true);
    expect([chargedByFailure, stored]).toEqual([0, undefined]);
    expect(retry.status).toBe('executed');
    expect((await store.get(transactional.storageKeyFor('early')))?.status).toBe(
      RecordStatus.Completed,
    );
  });

  it.each<[string, (db: SqliteDatabase) => void]>([
    ['exec("; ROLLBACK")', (db) => db.exec('; ROLLBACK')],
    ['exec("/* a /* b */ ROLLBACK")', (db) => db.exec('/* a /* b */ ROLLBACK')],
    ['exec("-- x\\n;;END TRANSACTION")', (db) => db.exec('-- x\n;;END TRANSACTION')],
    ['prepare(";ROLLBACK").run()', (db) => db.prepare(';ROLLBACK').run({})],
    ['prepare("/**/;commit").run()', (db) => db.prepare('/**/;commit').run({})],
  ])(
    'refuses %s, which SQLite runs as a transaction end: one charge over two runs',
    async (label, end) => {
      // Arrange
      const { transactional, charge, charges } = fixture();
      const handler = (tx: SqliteTransactionContext) => {
        try {
          end(tx.database); // "start over", ignoring a complaint
        } catch {}
        charge(label);
        return 'charged';
      };
      // Act
      const first = await transactional.runInTransaction({ key: label }, handler);
      const second = await transactional.runInTransaction({ key: label }, handler);
      // Assert
      expect([first.status, second.status]).toEqual(['executed', 'replayed']);
      expect(charges(label)).toBe(1);
    },
  );

  it('lets through a trigger body’s statements and a ROLLBACK in a string, a comment or a quoted name', async () => {
    // Arrange
    const { db, transactional, charges } = fixture();
    // Act
    const outcome = await transactional.runInTransaction({ key: 'not-control' }, (tx) => {
      tx.database.exec(`
        CREATE TEMP TRIGGER audit AFTER INSERT ON charges BEGIN
          INSERT INTO charges (ref) SELECT 'audit;' || new.ref WHERE new.ref NOT LIKE 'audit%';
          SELECT CASE WHEN 1 THEN 2 END;
        END;
        CREATE TABLE "rollback" ([commit;] TEXT); -- ; ROLLBACK
        INSERT INTO charges (ref) VALUES ('trig'' /* ; ROLLBACK'); /* ; COMMIT */`);
      tx.database.prepare('INSERT INTO "rollback" VALUES (\'; END\')').run({});
      return 'ok';
    });
    // Assert
    expect(outcome.status).toBe('executed');
    expect([charges("trig' /* ; ROLLBACK"), charges("audit;trig' /* ; ROLLBACK")]).toEqual([1, 1]);
    expect(db.prepare('SELECT count(*) AS n FROM "rollback"').get()).toEqual({ n: 1 });
  });

  it('refuses a ROLLBACK after a trigger body, as SQLite ends the trigger at its END', async () => {
    // Arrange
    const { transactional, charges } = fixture();
    // Act
    const failed = await caught(
      transactional.runInTransaction({ key: 'after-trigger' }, (tx) => {
        tx.database.exec(`CREATE TEMP TRIGGER t AFTER INSERT ON charges BEGIN SELECT 1; END;
          ROLLBACK; INSERT INTO charges (ref) VALUES ('after-trigger')`);
        return 'charged';
      }),
    );
    // Assert
    expect(isInvalidOptionsError(failed)).toBe(true);
    expect(charges('after-trigger')).toBe(0);
  });

  it('refuses, when run inside the handler, a ROLLBACK prepared outside it, and prepares one the handler does not run', async () => {
    // Arrange: a first run guards the connection; the statement is prepared between runs.
    const { db, transactional, charge, charges } = fixture();
    await transactional.runInTransaction({ key: 'warm-up' }, () => 'ok');
    const startOver = db.prepare('ROLLBACK');
    const handler = (tx: SqliteTransactionContext) => {
      tx.database.prepare('COMMIT'); // a cache filled ahead, not run
      try {
        startOver.run({});
      } catch {}
      charge('prepared-early');
      return 'charged';
    };
    // Act
    const first = await transactional.runInTransaction({ key: 'prepared-early' }, handler);
    const second = await transactional.runInTransaction({ key: 'prepared-early' }, handler);
    // Assert: refused inside, and the statement still runs outside a run (it is better-sqlite3's own).
    expect([first.status, second.status]).toEqual(['executed', 'replayed']);
    expect(charges('prepared-early')).toBe(1);
    db.exec('BEGIN');
    startOver.run({});
    expect(db.inTransaction).toBe(false);
    expect(startOver).toBeInstanceOf(Object.getPrototypeOf(db.prepare('SELECT 1')).constructor);
  });

  it('keeps ordinary statements as better-sqlite3 returns them, and a statement method that returns the statement keeps the guard', async () => {
    // Arrange
    const { db, transactional, charges } = fixture();
    const plain = db.prepare('SELECT 1 AS one');
    // Act
    const failed = await caught(
      transactional.runInTransaction({ key: 'chain' }, (tx) => {
        tx.database.exec("INSERT INTO charges (ref) VALUES ('chain')");
        tx.database.prepare('ROLLBACK').safeIntegers(false).run({});
        return 'charged';
      }),
    );
    // Assert
    expect(types.isProxy(plain)).toBe(false);
    expect(types.isProxy(db.prepare('COMMIT'))).toBe(true);
    expect(isInvalidOptionsError(failed)).toBe(true);
    expect(charges('chain')).toBe(0);
  });

  it('looks the connection’s methods up when called: a later patch of Database.prototype sees it', async () => {
    // Arrange: guarded by a first run, then instrumented.
    const { db, transactional } = fixture();
    await transactional.runInTransaction({ key: 'spied' }, () => 'ok');
    const prepare = vi.spyOn(Database.prototype, 'prepare');
    const exec = vi.spyOn(Database.prototype, 'exec');
    try {
      // Act
      db.prepare('SELECT 1').get();
      db.exec('SELECT 1');
      // Assert
      expect(prepare).toHaveBeenCalledWith('SELECT 1');
      expect(exec).toHaveBeenCalledWith('SELECT 1');
    } finally {
      prepare.mockRestore();
      exec.mockRestore();
    }
  });

  it('keeps calling a prepare of the connection’s own that it had before the guard', async () => {
    // Arrange
    const db = new Database(':memory:');
    open.push(db);
    const seen: string[] = [];
    const original = db.prepare.bind(db);
    Object.assign(db, {
      prepare: (source: string) => {
        seen.push(source);
        return original(source);
      },
    });
    const transactional = sqliteTransactional({ database: db });
    // Act
    const outcome = await transactional.runInTransaction({ key: 'own' }, (tx) => {
      tx.database.prepare('SELECT 2').get();
      return 'ok';
    });
    // Assert
    expect(outcome.status).toBe('executed');
    expect(seen).toContain('SELECT 2');
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
