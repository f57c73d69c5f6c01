import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createFingerprint,
  createIdempotency,
  isReplayedError,
  isStoreUnavailableError,
  RecordStatus,
} from '../../../src/index.js';
import {
  IsolationLevel,
  postgresStore,
  postgresTransactional,
  type TransactionContext,
} from '../../../src/postgres/index.js';
import { deferred } from '../../helpers/deferred.js';
import { type PostgresFixture, setupPostgres } from '../../helpers/postgres-env.js';

let fx: PostgresFixture;
const newKey = (label: string) => `${label}-${randomUUID()}`;

beforeAll(async () => {
  fx = await setupPostgres('tx', { max: 8 });
  await fx.pool.query(
    `CREATE TABLE "${fx.schema}".orders (id serial PRIMARY KEY, idempotency_key text NOT NULL, amount int NOT NULL)`,
  );
});

afterAll(async () => {
  await fx.dispose();
});

async function ordersFor(key: string): Promise<number> {
  const { rows } = await fx.pool.query(
    `SELECT count(*)::int AS n FROM "${fx.schema}".orders WHERE idempotency_key = $1`,
    [key],
  );
  return rows[0].n;
}

function insertOrder(key: string) {
  return async (tx: TransactionContext) => {
    await tx.query(`INSERT INTO "${fx.schema}".orders (idempotency_key, amount) VALUES ($1, 10)`, [
      key,
    ]);
    return { key, token: tx.token };
  };
}

/** Wait until a statement on this run's schema waits on a lock (a duplicate blocked on the first). */
async function waitForLockWait(): Promise<void> {
  for (let i = 0; i < 500; i++) {
    const { rows } = await fx.pool.query(
      "SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND position($1 in query) > 0",
      [fx.schema],
    );
    if (rows[0].n > 0) return;
    await sleep(20);
  }
  throw new Error('no statement started waiting on a lock');
}

describe('postgresTransactional', () => {
  it('commits the record with the handler’s writes and replays the outcome afterwards', async () => {
    const tx = postgresTransactional({ pool: fx.pool, schema: fx.schema });
    const key = newKey('once');
    let runs = 0;
    const handler = async (t: TransactionContext) => {
      runs++;
      return insertOrder(key)(t);
    };
    const first = await tx.runInTransaction({ key, payload: { a: 1 } }, handler);
    expect(first.status).toBe('executed');
    const second = await tx.runInTransaction({ key, payload: { a: 1 } }, handler);
    expect(second.status).toBe('replayed');
    if (first.status === 'executed' && second.status === 'replayed') {
      expect(second.value).toEqual(first.value);
    }
    expect(runs).toBe(1);
    expect(await ordersFor(key)).toBe(1);
  });

  it('rolls back the business rows and frees the key when the handler throws', async () => {
    const failures: Array<{ stored: boolean; attempt: number }> = [];
    const tx = postgresTransactional({
      pool: fx.pool,
      schema: fx.schema,
      hooks: { onFailed: ({ stored, attempt }) => failures.push({ stored, attempt }) },
    });
    const key = newKey('throws');
    await expect(
      tx.runInTransaction({ key }, async (t) => {
        await insertOrder(key)(t);
        throw new Error('handler failed');
      }),
    ).rejects.toThrow('handler failed');
    expect(await ordersFor(key)).toBe(0);
    const retry = await tx.runInTransaction({ key }, insertOrder(key));
    expect(retry.status).toBe('executed');
    expect(await ordersFor(key)).toBe(1);
    expect(failures).toEqual([{ stored: false, attempt: 1 }]);
  });

  it('rethrows a beforeCommit veto as is, as SQLite does: rolled back, the key free, a failure not an outage', async () => {
    const failures: Array<{ stored: boolean; attempt: number }> = [];
    const storeErrors: string[] = [];
    const tx = postgresTransactional({
      pool: fx.pool,
      schema: fx.schema,
      hooks: {
        onFailed: ({ stored, attempt }) => failures.push({ stored, attempt }),
        onStoreError: ({ operation }) => storeErrors.push(operation),
      },
    });
    const key = newKey('veto');
    const veto = new Error('insufficient funds');
    const vetoed = await tx
      .runInTransaction({ key }, insertOrder(key), {
        beforeCommit: () => {
          throw veto;
        },
      })
      .catch((error: unknown) => error);
    expect(vetoed).toBe(veto);
    // A statement of the user's own that fails in beforeCommit is the user's error too: no store
    // outage, and no hint about the records table's migrations (its column is not ours).
    const failedStatement = await tx
      .runInTransaction({ key }, insertOrder(key), {
        beforeCommit: (t) => t.query(`SELECT steps FROM "${fx.schema}".orders`).then(() => {}),
      })
      .catch((error: unknown) => error);
    expect(isStoreUnavailableError(failedStatement)).toBe(false);
    expect((failedStatement as { code?: string }).code).toBe('42703');
    expect(await ordersFor(key)).toBe(0);
    expect(failures).toEqual([
      { stored: false, attempt: 1 },
      { stored: false, attempt: 1 },
    ]);
    expect(storeErrors).toEqual([]);
    expect((await tx.runInTransaction({ key }, insertOrder(key))).status).toBe('executed');
    expect(await ordersFor(key)).toBe(1);
  });

  it('takes over an engine claim whose lease expired, and reports the takeover', async () => {
    const store = postgresStore({ pool: fx.pool, schema: fx.schema });
    const key = newKey('takeover');
    const events: string[] = [];
    const tx = postgresTransactional({
      pool: fx.pool,
      schema: fx.schema,
      hooks: {
        onTakeover: ({ attempt }) => events.push(`takeover:${attempt}`),
        onExecuted: ({ attempt }) => events.push(`executed:${attempt}`),
      },
    });
    // A crashed engine run: claimed with a short lease, never completed.
    const storageKey = tx.storageKeyFor(key);
    const claim = await store.claim(storageKey, { fingerprint: '', leaseMs: 50 });
    expect(claim.claimed).toBe(true);
    await sleep(120);
    const outcome = await tx.runInTransaction({ key }, insertOrder(key));
    expect(outcome).toMatchObject({ status: 'executed', attempt: 2 });
    expect(events).toEqual(['takeover:2', 'executed:2']);
  });

  it('honours the reservation of a crashed engine claim: another payload is a mismatch, the same takes over', async () => {
    const store = postgresStore({ pool: fx.pool, schema: fx.schema });
    const tx = postgresTransactional({ pool: fx.pool, schema: fx.schema });
    const key = newKey('reserved');
    // A crashed engine run whose key stays reserved for its payload (the engine passes its retention).
    const fingerprint = createFingerprint({ amount: 1 });
    const claim = await store.claim(tx.storageKeyFor(key), {
      fingerprint,
      leaseMs: 50,
      reserveMs: 3_600_000,
    });
    expect(claim.claimed).toBe(true);
    await sleep(120);
    // The transactional mode claims without a reservation of its own, and still respects this one.
    const other = await tx.runInTransaction({ key, payload: { amount: 2 } }, insertOrder(key));
    expect(other).toEqual({ status: 'mismatch' });
    expect(await ordersFor(key)).toBe(0);
    const same = await tx.runInTransaction({ key, payload: { amount: 1 } }, insertOrder(key));
    expect(same).toMatchObject({ status: 'executed', attempt: 2 });
    expect(await ordersFor(key)).toBe(1);
  });

  it('reports a mismatch for the same key with another payload', async () => {
    const tx = postgresTransactional({ pool: fx.pool, schema: fx.schema });
    const key = newKey('mismatch');
    await tx.runInTransaction({ key, payload: { amount: 1 } }, insertOrder(key));
    const other = await tx.runInTransaction({ key, payload: { amount: 2 } }, insertOrder(key));
    expect(other).toEqual({ status: 'mismatch' });
    expect(await ordersFor(key)).toBe(1);
  });

  it('makes a concurrent duplicate wait for the first transaction, then replay its outcome', async () => {
    const tx = postgresTransactional({ pool: fx.pool, schema: fx.schema });
    const key = newKey('wait');
    const gate = deferred();
    const claimed = deferred();
    let runs = 0;
    const first = tx.runInTransaction({ key }, async (t) => {
      runs++;
      claimed.resolve();
      await insertOrder(key)(t);
      await gate.promise;
      return 'first';
    });
    await claimed.promise;
    let duplicateSettled = false;
    const duplicate = tx
      .runInTransaction({ key }, async () => {
        runs++;
        return 'duplicate';
      })
      .finally(() => {
        duplicateSettled = true;
      });
    await waitForLockWait();
    expect(duplicateSettled).toBe(false);
    gate.resolve();
    expect((await first).status).toBe('executed');
    expect(await duplicate).toEqual({ status: 'replayed', value: 'first' });
    expect(runs).toBe(1);
  });

  it('lets a waiting duplicate execute when the first transaction rolls back', async () => {
    const tx = postgresTransactional({ pool: fx.pool, schema: fx.schema });
    const key = newKey('rollback');
    const gate = deferred();
    const claimed = deferred();
    const first = tx.runInTransaction({ key }, async (t) => {
      claimed.resolve();
      await insertOrder(key)(t);
      await gate.promise;
      throw new Error('first failed');
    });
    await claimed.promise;
    const duplicate = tx.runInTransaction({ key }, insertOrder(key));
    await waitForLockWait();
    gate.resolve();
    await expect(first).rejects.toThrow('first failed');
    expect((await duplicate).status).toBe('executed');
    expect(await ordersFor(key)).toBe(1);
  });

  it('answers in_progress at once with lockTimeoutMs 0 while another transaction holds the key', async () => {
    const tx = postgresTransactional({ pool: fx.pool, schema: fx.schema });
    const key = newKey('nowait');
    const gate = deferred();
    const claimed = deferred();
    const first = tx.runInTransaction({ key }, async () => {
      claimed.resolve();
      await gate.promise;
      return 'first';
    });
    await claimed.promise;
    const started = Date.now();
    const duplicate = await tx.runInTransaction({ key, lockTimeoutMs: 0 }, async () => 'never');
    const elapsed = Date.now() - started;
    gate.resolve();
    expect(duplicate.status).toBe('in_progress');
    if (duplicate.status === 'in_progress') expect(duplicate.retryAfterMs).toBeGreaterThan(0);
    // Generous bound for a loaded machine: the point is that it did not wait for the gate.
    expect(elapsed).toBeLessThan(5_000);
    expect((await first).status).toBe('executed');
  });

  for (const isolationLevel of [IsolationLevel.RepeatableRead, IsolationLevel.Serializable]) {
    it(`retries the 40001 a waiting duplicate gets under ${isolationLevel}, then replays`, async () => {
      const retries: unknown[] = [];
      const tx = postgresTransactional({
        pool: fx.pool,
        schema: fx.schema,
        isolationLevel,
        onRetry: ({ error }) => retries.push(error),
      });
      const key = newKey('serial');
      const gate = deferred();
      const claimed = deferred();
      let runs = 0;
      const first = tx.runInTransaction({ key }, async (t) => {
        runs++;
        claimed.resolve();
        await insertOrder(key)(t);
        await gate.promise;
        return 'first';
      });
      await claimed.promise;
      const duplicate = tx.runInTransaction({ key }, async () => {
        runs++;
        return 'duplicate';
      });
      await waitForLockWait();
      gate.resolve();
      expect((await first).status).toBe('executed');
      expect(await duplicate).toEqual({ status: 'replayed', value: 'first' });
      expect(runs).toBe(1);
      expect(retries.length).toBeGreaterThanOrEqual(1);
      expect((retries[0] as { code?: string }).code).toBe('40001');
    });
  }

  it('gives up with StoreUnavailableError after maxRetries serialization failures', async () => {
    const tx = postgresTransactional({ pool: fx.pool, schema: fx.schema, maxRetries: 2 });
    const key = newKey('giveup');
    let runs = 0;
    const error = await tx
      .runInTransaction({ key }, async (t) => {
        runs++;
        await insertOrder(key)(t);
        await t.query(
          "DO $$ BEGIN RAISE EXCEPTION 'forced' USING ERRCODE = 'serialization_failure'; END $$",
        );
      })
      .catch((e) => e);
    expect(isStoreUnavailableError(error)).toBe(true);
    expect(runs).toBe(3);
    expect(await ordersFor(key)).toBe(0);
  });

  it('refuses to report success when the handler swallowed a failed statement', async () => {
    const tx = postgresTransactional({ pool: fx.pool, schema: fx.schema });
    const key = newKey('swallow');
    await expect(
      tx.runInTransaction({ key }, async (t) => {
        await insertOrder(key)(t);
        await t.query('SELECT 1/0').catch(() => {});
        return 'looks fine';
      }),
    ).rejects.toThrow(/aborted/);
    expect(await ordersFor(key)).toBe(0);
    expect((await tx.runInTransaction({ key }, insertOrder(key))).status).toBe('executed');
  });

  it('turns a backend terminated mid-handler into StoreUnavailableError, commits nothing, and recovers', async () => {
    const tx = postgresTransactional({ pool: fx.pool, schema: fx.schema });
    const key = newKey('terminated');
    const gate = deferred();
    const pid = deferred();
    let backend = 0;
    const running = tx.runInTransaction({ key }, async (t) => {
      await insertOrder(key)(t);
      const { rows } = (await t.query('SELECT pg_backend_pid() AS pid')) as {
        rows: Array<{ pid: number }>;
      };
      backend = rows[0]!.pid;
      pid.resolve();
      await gate.promise;
      return insertOrder(key)(t);
    });
    await pid.promise;
    await fx.pool.query('SELECT pg_terminate_backend($1)', [backend]);
    // Let the dead connection's error event fire while the handler is idle (it must not crash the process).
    await sleep(200);
    gate.resolve();
    const error = await running.catch((e) => e);
    expect(isStoreUnavailableError(error)).toBe(true);
    expect(error.cause).toBeDefined();
    expect(await ordersFor(key)).toBe(0);
    expect((await tx.runInTransaction({ key }, insertOrder(key))).status).toBe('executed');
    expect(await ordersFor(key)).toBe(1);
  });

  it('replays an error outcome stored by the engine as ReplayedError', async () => {
    const engine = createIdempotency({
      store: postgresStore({ pool: fx.pool, schema: fx.schema }),
      storeErrors: true,
      cache: false,
    });
    const tx = postgresTransactional({ pool: fx.pool, schema: fx.schema });
    const key = newKey('stored-error');
    await expect(
      engine.run({ key }, () => {
        throw Object.assign(new Error('card declined'), { code: 'card_declined' });
      }),
    ).rejects.toThrow('card declined');
    const error = await tx.runInTransaction({ key }, async () => 'never').catch((e) => e);
    expect(isReplayedError(error)).toBe(true);
    expect(error.original).toMatchObject({ message: 'card declined', code: 'card_declined' });
  });

  it('shares records with the engine over postgresStore (same namespace)', async () => {
    const tx = postgresTransactional({ pool: fx.pool, schema: fx.schema, namespace: 'shop' });
    const engine = createIdempotency({
      store: postgresStore({ pool: fx.pool, schema: fx.schema }),
      namespace: 'shop',
      cache: false,
    });
    const key = newKey('shared');
    await tx.runInTransaction({ key, scope: 'tenant-1', payload: { n: 1 } }, async () => ({
      id: 7,
    }));
    const viaEngine = await engine.run({ key, scope: 'tenant-1', payload: { n: 1 } }, () => ({
      id: 8,
    }));
    expect(viaEngine).toEqual({ status: 'replayed', value: { id: 7 } });
    const record = await engine.store.get(engine.storageKeyFor(key, 'tenant-1'));
    expect(record?.status).toBe(RecordStatus.Completed);
  });
});
