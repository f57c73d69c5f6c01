/**
 * The SQLite transactional mode on a real file: the record commits or rolls back with the handler's writes
 * (and an outbox row), records are shared with sqliteStore + createIdempotency().run both ways, and misuse
 * (an async handler, a transaction already open) is refused with nothing committed.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import {
  createIdempotency,
  isInvalidOptionsError,
  isReplayedError,
  isStoreUnavailableError,
  RecordStatus,
} from '../../../src/index.js';
import { enqueue, migrateOutbox } from '../../../src/outbox/index.js';
import {
  type SqliteTransactionContext,
  sqliteStore,
  sqliteTransactional,
} from '../../../src/sqlite/index.js';
import { deferred } from '../../helpers/deferred.js';

const dir = mkdtempSync(join(tmpdir(), 'idempotency-kit-sqlite-tx-'));
const open: Database.Database[] = [];
afterAll(() => {
  for (const db of open) if (db.open) db.close();
  rmSync(dir, { recursive: true, force: true });
});

let files = 0;
/** A fresh WAL file with a business table, the records table and the outbox table. */
function fixture(options: { namespace?: string } = {}) {
  const db = new Database(join(dir, `tx-${++files}.db`), { timeout: 10_000 });
  open.push(db);
  db.pragma('journal_mode = WAL');
  db.exec(
    'CREATE TABLE payments (id INTEGER PRIMARY KEY, idempotency_key TEXT NOT NULL, amount INTEGER NOT NULL)',
  );
  migrateOutbox(db);
  const transactional = sqliteTransactional({ database: db, ...options });
  const store = sqliteStore({ database: db });
  const idempotency = createIdempotency({ store, cache: false, ...options });
  const insert = db.prepare('INSERT INTO payments (idempotency_key, amount) VALUES (?, ?)');
  const payments = (key: string) =>
    (
      db.prepare('SELECT count(*) AS n FROM payments WHERE idempotency_key = ?').get(key) as {
        n: number;
      }
    ).n;
  const outboxRows = () =>
    (db.prepare('SELECT count(*) AS n FROM idempotency_outbox').get() as { n: number }).n;
  return { db, transactional, store, idempotency, insert, payments, outboxRows };
}

async function caught(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => {
      throw new Error('expected a rejection');
    },
    (error: unknown) => error,
  );
}

describe('sqliteTransactional', () => {
  it('commits the record with the handler’s writes and replays the outcome afterwards', async () => {
    // Arrange
    const fx = fixture();
    let runs = 0;
    const handler = (tx: SqliteTransactionContext) => {
      runs++;
      fx.insert.run('once', 42);
      return { amount: 42, token: tx.token };
    };
    // Act
    const first = await fx.transactional.runInTransaction(
      { key: 'once', payload: { a: 1 } },
      handler,
    );
    const second = await fx.transactional.runInTransaction(
      { key: 'once', payload: { a: 1 } },
      handler,
    );
    // Assert
    expect(first.status).toBe('executed');
    if (first.status !== 'executed') return;
    expect(first.attempt).toBe(1);
    expect(first.token).toBeGreaterThan(0);
    expect(second).toEqual({ status: 'replayed', value: first.value });
    expect(runs).toBe(1);
    expect(fx.payments('once')).toBe(1);
    const record = await fx.store.get(fx.transactional.storageKeyFor('once'));
    expect(record?.status).toBe(RecordStatus.Completed);
    expect(record?.token).toBe(first.token);
    expect(fx.db.inTransaction).toBe(false);
  });

  it('gives the handler the open connection, its token, attempt, storage key and downstream keys', async () => {
    // Arrange
    const fx = fixture();
    let seen: Record<string, unknown> = {};
    let engineDownstream = '';
    // Act
    const outcome = fx.transactional.runInTransactionSync({ key: 'ctx', scope: 't1' }, (tx) => {
      seen = {
        sameConnection: tx.database === fx.db,
        inTransaction: tx.database.inTransaction,
        token: tx.token,
        attempt: tx.attempt,
        storageKey: tx.storageKey,
        charge: tx.downstreamKey('charge'),
        refund: tx.downstreamKey('refund'),
      };
      return 'ok';
    });
    await fx.idempotency.run({ key: 'ctx-engine', scope: 't1' }, (ctx) => {
      engineDownstream = ctx.downstreamKey('charge');
    });
    // Assert
    expect(outcome.status).toBe('executed');
    if (outcome.status !== 'executed') return;
    expect(seen).toMatchObject({
      sameConnection: true,
      inTransaction: true,
      token: outcome.token,
      attempt: 1,
      storageKey: fx.idempotency.storageKeyFor('ctx', 't1'),
    });
    expect(seen.charge).toMatch(/^ik_[0-9a-f]{40}$/);
    expect(seen.charge).not.toBe(seen.refund);
    // Same derivation as the engine's context: different keys give different downstream keys.
    expect(engineDownstream).toMatch(/^ik_[0-9a-f]{40}$/);
    expect(engineDownstream).not.toBe(seen.charge);
  });

  it('rolls back the record, the business row and the outbox row when the handler throws, and a retry executes', async () => {
    // Arrange
    const fx = fixture();
    const failure = new Error('handler failed');
    // Act
    const error = await caught(
      fx.transactional.runInTransaction({ key: 'throws' }, (tx) => {
        fx.insert.run('throws', 10);
        enqueue(tx.database, { topic: 'payment.initiated', key: 'throws', payload: { a: 1 } });
        throw failure;
      }),
    );
    // Assert
    expect(error).toBe(failure);
    expect(fx.db.inTransaction).toBe(false);
    expect(fx.payments('throws')).toBe(0);
    expect(fx.outboxRows()).toBe(0);
    expect(await fx.store.get(fx.transactional.storageKeyFor('throws'))).toBeUndefined();
    const retry = await fx.transactional.runInTransaction({ key: 'throws' }, (tx) => {
      fx.insert.run('throws', 10);
      enqueue(tx.database, { topic: 'payment.initiated', key: 'throws', payload: { a: 1 } });
      return 'done';
    });
    expect(retry.status).toBe('executed');
    expect(fx.payments('throws')).toBe(1);
    expect(fx.outboxRows()).toBe(1);
  });

  it('commits an extra table and the outbox’s enqueue() with the record', async () => {
    // Arrange
    const fx = fixture();
    fx.db.exec('CREATE TABLE audit (idempotency_key TEXT NOT NULL, note TEXT NOT NULL)');
    const audit = fx.db.prepare('INSERT INTO audit VALUES (?, ?)');
    // Act
    const outcome = await fx.transactional.runInTransaction(
      { key: 'outbox', payload: { amount: 7 } },
      (tx) => {
        fx.insert.run('outbox', 7);
        audit.run('outbox', 'created');
        const { messageId } = enqueue(tx.database, {
          topic: 'payment.initiated',
          key: 'outbox',
          payload: { amount: 7 },
        });
        return { messageId };
      },
    );
    // Assert
    expect(outcome.status).toBe('executed');
    expect(fx.payments('outbox')).toBe(1);
    expect(fx.db.prepare('SELECT count(*) AS n FROM audit').get()).toEqual({ n: 1 });
    expect(fx.outboxRows()).toBe(1);
  });

  it('refuses an async handler with InvalidOptionsError and rolls back what it wrote before its first await', async () => {
    // Arrange
    const fx = fixture();
    // Act
    const error = await caught(
      fx.transactional.runInTransaction(
        { key: 'async' },
        // @ts-expect-error an async handler does not type-check: it is the misuse under test
        async () => {
          fx.insert.run('async', 1);
          return 'never stored';
        },
      ),
    );
    // Assert
    expect(isInvalidOptionsError(error)).toBe(true);
    expect(String((error as Error).message)).toMatch(/must be synchronous/);
    expect(fx.db.inTransaction).toBe(false);
    expect(fx.payments('async')).toBe(0);
    expect(await fx.store.get(fx.transactional.storageKeyFor('async'))).toBeUndefined();
  });

  it('refuses to run inside a transaction already open on the connection', async () => {
    // Arrange
    const fx = fixture();
    let inner: unknown;
    // Act
    fx.db.transaction(() => {
      try {
        fx.transactional.runInTransactionSync({ key: 'nested' }, () => 'never');
      } catch (error) {
        inner = error;
      }
    })();
    // Assert
    expect(isInvalidOptionsError(inner)).toBe(true);
    expect(await fx.store.get(fx.transactional.storageKeyFor('nested'))).toBeUndefined();
  });

  it('reports a mismatch for the same key with another payload', async () => {
    // Arrange
    const fx = fixture();
    await fx.transactional.runInTransaction({ key: 'mm', payload: { amount: 1 } }, () => 1);
    // Act
    const other = await fx.transactional.runInTransaction(
      { key: 'mm', payload: { amount: 2 } },
      () => 2,
    );
    // Assert
    expect(other).toEqual({ status: 'mismatch' });
  });

  it('replays through the engine a key completed in transactional mode', async () => {
    // Arrange
    const fx = fixture();
    const first = await fx.transactional.runInTransaction(
      { key: 'tx-then-engine', payload: { amount: 5 } },
      () => ({ paid: 5 }),
    );
    // Act
    const replay = await fx.idempotency.run(
      { key: 'tx-then-engine', payload: { amount: 5 } },
      () => ({ paid: -1 }),
    );
    const mismatch = await fx.idempotency.run(
      { key: 'tx-then-engine', payload: { amount: 6 } },
      () => ({ paid: -1 }),
    );
    // Assert
    expect(first.status).toBe('executed');
    expect(replay).toEqual({ status: 'replayed', value: { paid: 5 } });
    expect(mismatch).toEqual({ status: 'mismatch' });
  });

  it('replays in transactional mode a key completed by the engine, without running the handler', async () => {
    // Arrange
    const fx = fixture();
    await fx.idempotency.run({ key: 'engine-then-tx', payload: { n: 1 } }, () => ({
      by: 'engine',
    }));
    let runs = 0;
    // Act
    const replay = await fx.transactional.runInTransaction(
      { key: 'engine-then-tx', payload: { n: 1 } },
      () => {
        runs++;
        return { by: 'tx' };
      },
    );
    const mismatch = await fx.transactional.runInTransaction(
      { key: 'engine-then-tx', payload: { n: 2 } },
      () => ({ by: 'tx' }),
    );
    // Assert
    expect(replay).toEqual({ status: 'replayed', value: { by: 'engine' } });
    expect(mismatch).toEqual({ status: 'mismatch' });
    expect(runs).toBe(0);
  });

  it('answers in_progress while the engine holds a live claim, then replays once it completes', async () => {
    // Arrange
    const fx = fixture();
    const gate = deferred();
    const claimed = deferred();
    const running = fx.idempotency.run({ key: 'held' }, async () => {
      claimed.resolve();
      await gate.promise;
      return 'engine';
    });
    await claimed.promise;
    let runs = 0;
    // Act
    const during = await fx.transactional.runInTransaction({ key: 'held' }, () => {
      runs++;
      return 'tx';
    });
    gate.resolve();
    await running;
    const after = await fx.transactional.runInTransaction({ key: 'held' }, () => {
      runs++;
      return 'tx';
    });
    // Assert
    expect(during.status).toBe('in_progress');
    if (during.status === 'in_progress') expect(during.retryAfterMs).toBeGreaterThan(0);
    expect(after).toEqual({ status: 'replayed', value: 'engine' });
    expect(runs).toBe(0);
  });

  it('replays a stored error outcome as ReplayedError', async () => {
    // Arrange
    const fx = fixture();
    const engine = createIdempotency({ store: fx.store, storeErrors: true, cache: false });
    await caught(
      engine.run({ key: 'stored-error' }, () => {
        throw Object.assign(new Error('card declined'), { code: 'card_declined' });
      }),
    );
    // Act
    const error = await caught(fx.transactional.runInTransaction({ key: 'stored-error' }, () => 1));
    // Assert
    expect(isReplayedError(error)).toBe(true);
    expect((error as Error).message).toMatch(/card declined/);
  });

  it('takes over the expired claim of a crashed engine attempt with a higher token, fencing the old holder', async () => {
    // Arrange
    const fx = fixture();
    const key = fx.transactional.storageKeyFor('crashed');
    const stale = await fx.store.claim(key, { fingerprint: '', leaseMs: 1 });
    if (!stale.claimed) throw new Error('setup claim lost');
    await new Promise((resolve) => setTimeout(resolve, 20));
    // Act
    const outcome = await fx.transactional.runInTransaction({ key: 'crashed' }, (tx) => ({
      attempt: tx.attempt,
    }));
    // Assert
    expect(outcome.status).toBe('executed');
    if (outcome.status !== 'executed') return;
    expect(outcome.attempt).toBe(2);
    expect(outcome.token).toBeGreaterThan(stale.token);
    expect(await fx.store.complete(key, stale.token, new Uint8Array([1]), 60_000)).toBe(false);
  });

  it('honours the reservation of a crashed engine claim: another payload is a mismatch, the same one runs', async () => {
    // Arrange: an engine claim (reserved for a day, as the engine reserves for its retention) whose holder
    // crashed; its lease is over.
    const fx = fixture();
    const key = fx.transactional.storageKeyFor('reserved');
    const crashed = await fx.store.claim(key, {
      fingerprint: 'fp-a',
      leaseMs: 1,
      reserveMs: 86_400_000,
    });
    if (!crashed.claimed) throw new Error('setup claim lost');
    await new Promise((resolve) => setTimeout(resolve, 20));
    let runs = 0;
    const handler = (tx: SqliteTransactionContext) => {
      runs++;
      fx.insert.run('reserved', 1);
      return { attempt: tx.attempt };
    };
    // Act
    const other = await fx.transactional.runInTransaction(
      { key: 'reserved', fingerprint: 'fp-b' },
      handler,
    );
    const same = await fx.transactional.runInTransaction(
      { key: 'reserved', fingerprint: 'fp-a' },
      handler,
    );
    const afterwards = await fx.transactional.runInTransaction(
      { key: 'reserved', fingerprint: 'fp-b' },
      handler,
    );
    // Assert
    expect(other).toEqual({ status: 'mismatch' });
    expect(same).toMatchObject({ status: 'executed', value: { attempt: 2 }, attempt: 2 });
    if (same.status === 'executed') expect(same.token).toBeGreaterThan(crashed.token);
    expect(afterwards).toEqual({ status: 'mismatch' });
    expect(runs).toBe(1);
    expect(fx.payments('reserved')).toBe(1);
    expect(await fx.store.complete(key, crashed.token, new Uint8Array([1]), 60_000)).toBe(false);
  });

  it('answers a mismatch from under the write lock when a reserved dead lease appears after its read', async () => {
    // Arrange: the lock-free read finds nothing; then, before this call's claim (here from inside the
    // clock, under the lock this call already holds), a crashed engine claim of another payload shows
    // up, lease over, reservation not: as if another process had committed it in between.
    const db = fixture().db;
    let calls = 0;
    let insertRow = () => {};
    const clock = {
      now: () => {
        if (++calls === 2) insertRow();
        return 1_700_000_000_000;
      },
    };
    const transactional = sqliteTransactional({ database: db, clock });
    const key = transactional.storageKeyFor('late');
    insertRow = () =>
      db
        .prepare(
          `INSERT INTO idempotency_records (key, status, fingerprint, token, attempt, created_at,
             expires_at, reserved_until) VALUES (?, 'in_progress', 'fp-a', 1, 1, 0, 1, 1800000000000)`,
        )
        .run(key);
    let runs = 0;
    // Act
    const outcome = await transactional.runInTransaction(
      { key: 'late', fingerprint: 'fp-b' },
      () => {
        runs++;
        return 'ran';
      },
    );
    // Assert
    expect(calls).toBeGreaterThanOrEqual(2);
    expect(outcome).toEqual({ status: 'mismatch' });
    expect(runs).toBe(0);
    expect(db.prepare('SELECT fingerprint, attempt FROM idempotency_records').all()).toEqual([
      { fingerprint: 'fp-a', attempt: 1 },
    ]);
  });

  it('issues tokens from the store’s counter: above a released engine claim, and below the next one', async () => {
    // Arrange
    const fx = fixture();
    const key = fx.transactional.storageKeyFor('counter');
    const released = await fx.store.claim(key, { fingerprint: '', leaseMs: 60_000 });
    if (!released.claimed) throw new Error('setup claim lost');
    await fx.store.release(key, released.token);
    // Act
    const outcome = await fx.transactional.runInTransaction({ key: 'counter' }, () => 'x');
    await fx.store.delete(key);
    const next = await fx.store.claim(key, { fingerprint: '', leaseMs: 60_000 });
    // Assert
    if (outcome.status !== 'executed' || !next.claimed) throw new Error('unexpected outcome');
    expect(outcome.token).toBeGreaterThan(released.token);
    expect(next.token).toBeGreaterThan(outcome.token);
  });

  it('shares records only within one namespace', async () => {
    // Arrange
    const fx = fixture({ namespace: 'billing' });
    const other = sqliteTransactional({ database: fx.db, namespace: 'shipping' });
    await fx.transactional.runInTransaction({ key: 'ns' }, () => 'billing');
    // Act
    const engine = await fx.idempotency.run({ key: 'ns' }, () => 'engine');
    const shipping = await other.runInTransaction({ key: 'ns' }, () => 'shipping');
    // Assert
    expect(engine).toEqual({ status: 'replayed', value: 'billing' });
    expect(shipping.status).toBe('executed');
  });

  it('calls the hooks (a handler or beforeCommit error is a rolled-back failure) and beforeCommit, and a beforeCommit error rolls everything back', async () => {
    // Arrange
    const events: string[] = [];
    const db = fixture().db;
    const transactional = sqliteTransactional({
      database: db,
      hooks: {
        onExecuted: () => events.push('executed'),
        onReplayed: () => events.push('replayed'),
        onMismatch: () => events.push('mismatch'),
        onFailed: (e) => events.push(`failed:${e.stored}:${e.attempt}`),
      },
    });
    const veto = new Error('veto');
    // Act
    const vetoed = await caught(
      transactional.runInTransaction({ key: 'hooks' }, () => 1, {
        beforeCommit: (tx) => {
          events.push(`beforeCommit:${tx.database.inTransaction}`);
          throw veto;
        },
      }),
    );
    const thrown = await caught(
      transactional.runInTransaction({ key: 'hooks' }, () => {
        throw new Error('declined');
      }),
    );
    await transactional.runInTransaction({ key: 'hooks' }, () => 1);
    await transactional.runInTransaction({ key: 'hooks' }, () => 1);
    await transactional.runInTransaction({ key: 'hooks', payload: 'other' }, () => 1);
    // Assert
    expect(vetoed).toBe(veto);
    expect((thrown as Error).message).toBe('declined');
    expect(events).toEqual([
      'beforeCommit:true',
      'failed:false:1',
      'failed:false:1',
      'executed',
      'replayed',
      'mismatch',
    ]);
  });

  it('fails closed with StoreUnavailableError when another connection holds the write lock past the busy timeout', async () => {
    // Arrange
    const fx = fixture();
    const impatient = new Database(fx.db.name, { timeout: 50 });
    open.push(impatient);
    const transactional = sqliteTransactional({ database: impatient });
    fx.db.exec('BEGIN IMMEDIATE');
    let runs = 0;
    // Act
    let error: unknown;
    try {
      error = await caught(
        transactional.runInTransaction({ key: 'busy' }, () => {
          runs++;
          return 1;
        }),
      );
    } finally {
      fx.db.exec('ROLLBACK');
    }
    const later = await transactional.runInTransaction({ key: 'busy' }, () => 2);
    // Assert
    expect(isStoreUnavailableError(error)).toBe(true);
    expect(((error as Error).cause as { code?: string }).code).toBe('SQLITE_BUSY');
    expect(runs).toBe(0);
    expect(later.status).toBe('executed');
  });

  it('rejects bad options and bad keys', () => {
    // Arrange
    const fx = fixture();
    // Act / Assert
    expect(() => sqliteTransactional({ database: './app.db' as never })).toThrow(
      /must be an open better-sqlite3 Database/,
    );
    expect(() => sqliteTransactional({ database: fx.db, table: 'bad-name' })).toThrow(/table/);
    expect(() => fx.transactional.runInTransactionSync({ key: '' }, () => 1)).toThrow(/empty/);
  });
});
