/**
 * The SQLite transactional mode at its edges, on a real file: a deferred foreign key of the user's that
 * fails at COMMIT, and options checked when created rather than after a handler ran.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { isInvalidOptionsError, isStoreUnavailableError } from '../../../src/index.js';
import { sqliteTransactional } from '../../../src/sqlite/index.js';

const dir = mkdtempSync(join(tmpdir(), 'idempotency-kit-sqlite-tx-edges-'));
const open: Database.Database[] = [];
afterAll(() => {
  for (const db of open) if (db.open) db.close();
  rmSync(dir, { recursive: true, force: true });
});

let files = 0;
function database(): Database.Database {
  const db = new Database(join(dir, `edges-${++files}.db`));
  open.push(db);
  db.pragma('journal_mode = WAL');
  db.pragma('foreign_keys = ON');
  return db;
}

function thrown(fn: () => unknown): unknown {
  try {
    fn();
  } catch (error) {
    return error;
  }
  return undefined;
}

describe('sqliteTransactional at its edges', () => {
  it('rethrows a deferred foreign key failing at COMMIT as the handler’s error, not a store outage', () => {
    // Arrange
    const db = database();
    db.exec(`CREATE TABLE customers (id INTEGER PRIMARY KEY);
      CREATE TABLE charges (id INTEGER PRIMARY KEY,
        customer INTEGER REFERENCES customers (id) DEFERRABLE INITIALLY DEFERRED)`);
    const storeErrors: string[] = [];
    const failures: boolean[] = [];
    const transactional = sqliteTransactional({
      database: db,
      hooks: {
        onStoreError: ({ operation }) => storeErrors.push(operation),
        onFailed: ({ stored }) => failures.push(stored),
      },
    });
    const charge = db.prepare('INSERT INTO charges (customer) VALUES (?)');
    // Act: the row passes its INSERT; the deferred check fails at COMMIT.
    const error = thrown(() =>
      transactional.runInTransactionSync({ key: 'deferred' }, () => charge.run(42).changes),
    );
    // Assert
    expect(isStoreUnavailableError(error)).toBe(false);
    expect((error as { code?: string }).code).toBe('SQLITE_CONSTRAINT_FOREIGNKEY');
    expect(storeErrors).toEqual([]);
    expect(failures).toEqual([false]);
    expect(db.inTransaction).toBe(false);
    expect((db.prepare('SELECT count(*) AS n FROM charges').get() as { n: number }).n).toBe(0);
    // Nothing was committed: the key is free.
    db.prepare('INSERT INTO customers (id) VALUES (42)').run();
    const retry = transactional.runInTransactionSync(
      { key: 'deferred' },
      () => charge.run(42).changes,
    );
    expect(retry).toMatchObject({ status: 'executed', value: 1 });
  });

  it('refuses bad options when created, before any handler runs', () => {
    // Arrange
    const db = database();
    const bad: Array<Record<string, unknown>> = [
      { codec: {} },
      { codec: { encode: () => new Uint8Array() } },
      { namespace: 7 },
      { clock: {} },
      { clock: Date.now },
      { migrate: 'no' },
    ];
    // Act / Assert
    for (const options of bad) {
      const error = thrown(() => sqliteTransactional({ database: db, ...options } as never));
      expect(isInvalidOptionsError(error), JSON.stringify(options)).toBe(true);
    }
    // A bad per-call codec is refused before the handler runs.
    const transactional = sqliteTransactional({ database: db });
    let runs = 0;
    const error = thrown(() =>
      transactional.runInTransactionSync({ key: 'codec', codec: {} as never }, () => {
        runs++;
        return 1;
      }),
    );
    expect(isInvalidOptionsError(error)).toBe(true);
    expect(runs).toBe(0);
    expect(transactional.storageKeyFor('codec')).toMatch(/^[0-9a-f]{64}$/);
  });
});
