/**
 * The SQLite transactional mode when SQLite ends the handler's transaction itself (an INSERT OR ROLLBACK
 * conflict, a trigger's RAISE(ROLLBACK)) or a statement prepared before the guard does, and the handler
 * catches the error and goes on writing: every statement after the end is refused, whatever prepared it, so
 * nothing commits without a record, and a COMMIT or ROLLBACK prepared before the guard is refused as it
 * runs. On a connection that could not be guarded (frozen), a claim a COMMIT committed is completed with the
 * run's error, and a key whose writes after a rollback committed is claimed anew for that error. An `exec`
 * that goes around the connection's own (bound before the guard, or `Database.prototype.exec.call`) and an
 * `INSERT … RETURNING` iterator opened before the end are checked as well. Charges are counted across the
 * first run and its retry. On a real WAL file.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { isInvalidOptionsError, isReplayedError } from '../../../src/index.js';
import {
  type SqliteDatabase,
  type SqliteTransactionContext,
  sqliteTransactional,
} from '../../../src/sqlite/index.js';

const dir = mkdtempSync(join(tmpdir(), 'idempotency-kit-sqlite-ended-'));
const open: Database.Database[] = [];
afterAll(() => {
  for (const db of open) if (db.open) db.close();
  rmSync(dir, { recursive: true, force: true });
});

let files = 0;
/**
 * A fresh WAL file with a charges table and a `seen` table whose row 'x' makes `INSERT OR ROLLBACK` of it
 * conflict; `before` runs on the connection before sqliteTransactional is created on it.
 */
function fixture<B>(before: (db: SqliteDatabase) => B = () => undefined as B) {
  const db = new Database(join(dir, `ended-${++files}.db`), { timeout: 5_000 });
  open.push(db);
  db.pragma('journal_mode = WAL');
  db.exec(`CREATE TABLE charges (id INTEGER PRIMARY KEY, ref TEXT NOT NULL);
    CREATE TABLE seen (k TEXT PRIMARY KEY); INSERT INTO seen VALUES ('x');`);
  const early = before(db);
  const transactional = sqliteTransactional({ database: db });
  const charges = () => (db.prepare('SELECT count(*) AS n FROM charges').get() as { n: number }).n;
  return { db, early, transactional, charges };
}

async function settled(promise: Promise<{ status: string }>): Promise<string> {
  return promise.then(
    (outcome) => outcome.status,
    (error: unknown) =>
      isReplayedError(error)
        ? 'replayed error'
        : isInvalidOptionsError(error)
          ? 'invalid'
          : 'other',
  );
}

/** Swallow what `write` throws, as a handler that "carries on" does. */
function ignoring(write: () => unknown): void {
  try {
    write();
  } catch {}
}

describe('sqliteTransactional: a transaction SQLite ends under the handler', () => {
  it('refuses the writes after an INSERT OR ROLLBACK conflict the handler ignored: one charge over the run and its retry', async () => {
    // Arrange: the first attempt conflicts (a duplicate the handler thinks it may ignore), the retry not.
    const { db, transactional, charges } = fixture();
    const charge = db.prepare("INSERT INTO charges (ref) VALUES ('c')");
    let attempts = 0;
    const handler = (tx: SqliteTransactionContext) => {
      const k = ++attempts === 1 ? 'x' : 'y';
      ignoring(() => tx.database.prepare('INSERT OR ROLLBACK INTO seen VALUES (@k)').run({ k }));
      ignoring(() => charge.run({}));
      return 'charged';
    };
    // Act
    const first = await settled(transactional.runInTransaction({ key: 'or-rollback' }, handler));
    const chargedByFirst = charges();
    const retry = await settled(transactional.runInTransaction({ key: 'or-rollback' }, handler));
    // Assert: the first run committed nothing (its charge was refused), so the retry charged once.
    expect([first, chargedByFirst, retry, charges()]).toEqual(['invalid', 0, 'executed', 1]);
  });

  it('refuses db.transaction(), exec and a pragma after a trigger’s RAISE(ROLLBACK), and lets the connection work after the run', async () => {
    // Arrange
    const { db, transactional, charges } = fixture();
    db.exec(`CREATE TABLE audit (v INTEGER);
      CREATE TRIGGER veto BEFORE INSERT ON audit BEGIN SELECT RAISE(ROLLBACK, 'vetoed'); END;`);
    const handler = (tx: SqliteTransactionContext) => {
      ignoring(() => tx.database.prepare('INSERT INTO audit VALUES (1)').run({}));
      ignoring(() =>
        tx.database.transaction(() => tx.database.exec("INSERT INTO charges (ref) VALUES ('t')"))(),
      );
      ignoring(() => tx.database.exec("INSERT INTO charges (ref) VALUES ('e')"));
      ignoring(() => tx.database.pragma('user_version = 7'));
      return 'charged';
    };
    // Act
    const first = await settled(transactional.runInTransaction({ key: 'raise' }, handler));
    const retry = await settled(transactional.runInTransaction({ key: 'raise' }, handler));
    // Assert: nothing committed, twice; outside a run the connection runs anything.
    const version = db.pragma('user_version', { simple: true });
    expect([first, retry, charges(), version]).toEqual(['invalid', 'invalid', 0, 0]);
    db.exec("INSERT INTO charges (ref) VALUES ('after')");
    expect(charges()).toBe(1);
  });

  it('refuses, after an end, statements prepared before the guard', async () => {
    // Arrange: both prepared before sqliteTransactional was created on the connection.
    const { early, transactional, charges } = fixture((db) => ({
      conflict: db.prepare("INSERT OR ROLLBACK INTO seen VALUES ('x')"),
      charge: db.prepare("INSERT INTO charges (ref) VALUES ('early')"),
    }));
    const handler = () => {
      ignoring(() => early.conflict.run({}));
      ignoring(() => early.charge.run({}));
      return 'charged';
    };
    // Act
    const first = await settled(transactional.runInTransaction({ key: 'early-end' }, handler));
    const retry = await settled(transactional.runInTransaction({ key: 'early-end' }, handler));
    // Assert
    expect([first, retry, charges()]).toEqual(['invalid', 'invalid', 0]);
  });

  it('refuses a ROLLBACK and a COMMIT prepared before the guard: the run goes on in its transaction', async () => {
    // Arrange
    const { early, transactional, charges } = fixture((db) => ({
      rollback: db.prepare('ROLLBACK'),
      commit: db.prepare('/* done */ COMMIT'),
      charge: db.prepare("INSERT INTO charges (ref) VALUES ('early')"),
    }));
    const handler = () => {
      ignoring(() => early.rollback.run({}));
      early.charge.run({});
      ignoring(() => early.commit.run({}));
      return 'charged';
    };
    // Act
    const first = await settled(transactional.runInTransaction({ key: 'early-control' }, handler));
    const retry = await settled(transactional.runInTransaction({ key: 'early-control' }, handler));
    // Assert
    expect([first, retry, charges()]).toEqual(['executed', 'replayed', 1]);
  });

  it('completes the claim a COMMIT committed with the run’s error on a connection that could not be guarded: the retry replays it', async () => {
    // Arrange: a frozen connection cannot be given its own exec and prepare.
    const { db, transactional, charges } = fixture((db) => Object.freeze(db));
    const failed: boolean[] = [];
    const hooked = sqliteTransactional({
      database: db,
      hooks: { onFailed: ({ stored }) => failed.push(stored) },
    });
    const handler = (tx: SqliteTransactionContext) => {
      tx.database.exec("INSERT INTO charges (ref) VALUES ('before')");
      tx.database.exec('COMMIT');
      tx.database.exec("INSERT INTO charges (ref) VALUES ('after')");
      return 'charged';
    };
    // Act
    const first = await settled(hooked.runInTransaction({ key: 'frozen-commit' }, handler));
    const retry = await settled(transactional.runInTransaction({ key: 'frozen-commit' }, handler));
    // Assert: both writes committed in the first run, and the key keeps the handler from running again
    // (it answered in_progress, then let a takeover run it once the lease's hour was over).
    expect([first, retry, charges(), failed]).toEqual(['invalid', 'replayed error', 2, [true]]);
  });

  it('claims the key anew for the error on a connection that could not be guarded, whose writes after a rollback committed', async () => {
    // Arrange
    const { db, transactional, charges } = fixture((db) => Object.freeze(db));
    const handler = (tx: SqliteTransactionContext) => {
      ignoring(() => tx.database.prepare("INSERT OR ROLLBACK INTO seen VALUES ('x')").run({}));
      db.prepare("INSERT INTO charges (ref) VALUES ('frozen')").run({});
      return 'charged';
    };
    // Act
    const first = await settled(transactional.runInTransaction({ key: 'frozen' }, handler));
    const retry = await settled(transactional.runInTransaction({ key: 'frozen' }, handler));
    // Assert: the charge committed in autocommit once; the retry got the recorded error back.
    expect([first, retry, charges()]).toEqual(['invalid', 'replayed error', 1]);
  });

  it('records the key as failed all the same when the handler throws after such writes', async () => {
    // Arrange
    const { db, transactional, charges } = fixture((db) => Object.freeze(db));
    const handler = (tx: SqliteTransactionContext) => {
      ignoring(() => tx.database.prepare("INSERT OR ROLLBACK INTO seen VALUES ('x')").run({}));
      db.prepare("INSERT INTO charges (ref) VALUES ('frozen')").run({});
      throw new Error('card declined');
    };
    // Act
    const first = await settled(transactional.runInTransaction({ key: 'frozen-throw' }, handler));
    const retry = await settled(transactional.runInTransaction({ key: 'frozen-throw' }, handler));
    // Assert: the handler's own error first, then the recorded one instead of a second charge.
    expect([first, retry, charges()]).toEqual(['other', 'replayed error', 1]);
  });

  it('keeps the value a COMMIT in beforeCommit committed with the record, on a connection that could not be guarded', async () => {
    // Arrange
    const { db, transactional, charges } = fixture((db) => Object.freeze(db));
    // Act
    const first = await settled(
      transactional.runInTransaction(
        { key: 'frozen-before' },
        () => {
          db.exec("INSERT INTO charges (ref) VALUES ('before')");
          return 'charged';
        },
        { beforeCommit: (tx) => tx.database.exec('COMMIT') },
      ),
    );
    const retry = await transactional.runInTransaction({ key: 'frozen-before' }, () => 'again');
    // Assert
    expect([first, retry, charges()]).toEqual([
      'invalid',
      { status: 'replayed', value: 'charged' },
      1,
    ]);
  });
});

describe('sqliteTransactional: SQL run around the connection’s own methods', () => {
  it('refuses the writes of an exec bound before the guard after an INSERT OR ROLLBACK conflict: one charge over the run and its retry', async () => {
    // Arrange: the application kept a bound exec from before sqliteTransactional was created.
    const { early: exec, transactional, charges } = fixture((db) => db.exec.bind(db));
    let attempts = 0;
    const handler = (tx: SqliteTransactionContext) => {
      const k = ++attempts === 1 ? 'x' : 'y';
      ignoring(() => tx.database.prepare('INSERT OR ROLLBACK INTO seen VALUES (@k)').run({ k }));
      ignoring(() => exec("INSERT INTO charges (ref) VALUES ('bound')"));
      return 'charged';
    };
    // Act
    const first = await settled(transactional.runInTransaction({ key: 'bound-exec' }, handler));
    const chargedByFirst = charges();
    const retry = await settled(transactional.runInTransaction({ key: 'bound-exec' }, handler));
    // Assert: the first run committed nothing, so the retry charged once.
    expect([first, chargedByFirst, retry, charges()]).toEqual(['invalid', 0, 'executed', 1]);
  });

  it('refuses Database.prototype.exec called on the connection after a trigger’s RAISE(ROLLBACK)', async () => {
    // Arrange
    const { db, transactional, charges } = fixture();
    db.exec(`CREATE TABLE audit (v INTEGER);
      CREATE TRIGGER veto BEFORE INSERT ON audit BEGIN SELECT RAISE(ROLLBACK, 'vetoed'); END;`);
    const handler = (tx: SqliteTransactionContext) => {
      ignoring(() => tx.database.prepare('INSERT INTO audit VALUES (1)').run({}));
      ignoring(() =>
        Database.prototype.exec.call(db, "INSERT INTO charges (ref) VALUES ('proto')"),
      );
      return 'charged';
    };
    // Act
    const first = await settled(transactional.runInTransaction({ key: 'proto-exec' }, handler));
    const retry = await settled(transactional.runInTransaction({ key: 'proto-exec' }, handler));
    // Assert
    expect([first, retry, charges()]).toEqual(['invalid', 'invalid', 0]);
  });

  it('refuses a ROLLBACK or a COMMIT in a text run by an exec bound before the guard: the run goes on in its transaction', async () => {
    // Arrange
    const { early: exec, transactional, charges } = fixture((db) => db.exec.bind(db));
    const handler = () => {
      ignoring(() => exec("ROLLBACK; INSERT INTO charges (ref) VALUES ('after rollback')"));
      exec("INSERT INTO charges (ref) VALUES ('charged')");
      ignoring(() => exec('COMMIT'));
      return 'charged';
    };
    // Act
    const first = await settled(transactional.runInTransaction({ key: 'bound-control' }, handler));
    const retry = await settled(transactional.runInTransaction({ key: 'bound-control' }, handler));
    // Assert: neither statement of the first text ran; the charge committed with the record.
    expect([first, retry, charges()]).toEqual(['executed', 'replayed', 1]);
  });

  it('refuses the first step, after an end, of an INSERT … RETURNING iterator opened before it (unsafe mode)', async () => {
    // Arrange: unsafe mode lets statements run while an iterator is open.
    const { db, transactional, charges } = fixture();
    db.unsafeMode(true);
    const handler = (tx: SqliteTransactionContext) => {
      const rows = db
        .prepare("INSERT INTO charges (ref) VALUES ('returning') RETURNING id")
        .iterate();
      ignoring(() => tx.database.prepare("INSERT OR ROLLBACK INTO seen VALUES ('x')").run({}));
      ignoring(() => rows.next());
      ignoring(() => rows.next());
      return 'charged';
    };
    // Act
    const first = await settled(transactional.runInTransaction({ key: 'iterator' }, handler));
    const retry = await settled(transactional.runInTransaction({ key: 'iterator' }, handler));
    // Assert
    expect([first, retry, charges()]).toEqual(['invalid', 'invalid', 0]);
  });

  it('refuses the first step, inside the handler after an end, of an INSERT … RETURNING iterator opened before the run (unsafe mode)', async () => {
    // Arrange: each attempt opens its iterator before runInTransaction, outside every handler.
    const { db, transactional, charges } = fixture();
    db.unsafeMode(true);
    const attempt = () => {
      const rows = db
        .prepare("INSERT INTO charges (ref) VALUES ('opened early') RETURNING id")
        .iterate();
      return transactional.runInTransaction({ key: 'early-iterator' }, () => {
        ignoring(() => db.prepare("INSERT OR ROLLBACK INTO seen VALUES ('x')").run({}));
        ignoring(() => rows.next());
        ignoring(() => rows.return?.());
        return 'charged';
      });
    };
    // Act
    const first = await settled(attempt());
    const retry = await settled(attempt());
    // Assert: before, each step committed its charge in autocommit, with no record (two charges).
    expect([first, retry, charges()]).toEqual(['invalid', 'invalid', 0]);
  });
});
