/**
 * The engine (`postgresStore`) and the transactional mode (`postgresTransactional`) on one table: a
 * transaction that holds a key until its COMMIT must hold up only the claims of that key, never the other
 * keys an engine batch carries with it (migration 0006's lock timeout on the batch functions, then a
 * fallback that claims those keys one by one, concurrently), and a claim sent alone must not wait for that
 * COMMIT either (claim-bounded.sql's own lock timeout), so retries of a long transaction's request cannot
 * pile up on the pool.
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIdempotency } from '../../../src/index.js';
import {
  type PgQueryable,
  postgresStore,
  postgresTransactional,
} from '../../../src/postgres/index.js';
import { deferred } from '../../helpers/deferred.js';
import { type PostgresFixture, setupPostgres } from '../../helpers/postgres-env.js';

let fx: PostgresFixture;
const newKey = (label: string) => `${label}-${randomUUID()}`;

beforeAll(async () => {
  fx = await setupPostgres('mixed', { max: 12 });
});

afterAll(async () => {
  await fx.dispose();
});

/**
 * Hold `key` in a transactional run until the returned gate is opened, then commit (or roll back: the
 * handler throws 'rolled back'); resolves once the key is claimed.
 */
async function holdInTransaction(
  namespace: string,
  key: string,
  ending: 'commit' | 'rollback' = 'commit',
) {
  const tx = postgresTransactional({ pool: fx.pool, schema: fx.schema, namespace });
  const gate = deferred();
  const claimed = deferred();
  const run = tx.runInTransaction({ key, payload: { n: 1 } }, async () => {
    claimed.resolve();
    await gate.promise;
    if (ending === 'rollback') throw new Error('rolled back');
    return 'from the transaction';
  });
  await claimed.promise;
  return { open: gate.resolve, run };
}

/**
 * Run `body` while a transactional run holds `key` (see {@link holdInTransaction}); the transaction then
 * commits, whatever `body` did, and is awaited, so no test leaves a transaction open behind it.
 */
async function whileHeld(
  namespace: string,
  key: string,
  body: (held: Awaited<ReturnType<typeof holdInTransaction>>) => Promise<void>,
): Promise<void> {
  const held = await holdInTransaction(namespace, key);
  try {
    await body(held);
  } finally {
    held.open();
    await held.run.catch(() => {});
  }
}

/** The calls the store receives, by operation (to show the keys really went as one batch). */
function countingStore(store: ReturnType<typeof postgresStore>) {
  const calls: Array<{ operation: string; keys: number }> = [];
  const counted = new Proxy(store, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver);
      if (property !== 'claimMany' && property !== 'completeAndClaimMany') return value;
      return (...args: unknown[]) => {
        const claims = (property === 'claimMany' ? args[0] : args[1]) as unknown[];
        calls.push({ operation: property, keys: claims.length });
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  return { store: counted, calls };
}

describe('engine and transactional mode on one table', () => {
  it('answers a batched claim of a key a transaction holds as in progress, without holding up the batch’s other keys', async () => {
    const namespace = 'shop';
    const heldKey = newKey('held');
    await whileHeld(namespace, heldKey, async (held) => {
      const { store, calls } = countingStore(
        postgresStore({ pool: fx.pool, schema: fx.schema, busyRetryAfterMs: 5000 }),
      );
      const engine = createIdempotency({ store, namespace, cache: false });
      const others = ['a', 'b', 'c', 'd'].map(newKey);
      let executed = 0;
      const started = performance.now();
      // Same tick: one batch carries the held key and the four others.
      const runs = [heldKey, ...others].map((key) =>
        engine.run({ key, payload: { n: 1 } }, () => {
          executed++;
          return key;
        }),
      );
      const outcome = await Promise.race([Promise.all(runs), sleep(5000).then(() => 'stalled')]);
      expect(calls[0]).toEqual({ operation: 'claimMany', keys: 5 });
      expect(outcome).toMatchObject([
        { status: 'in_progress', retryAfterMs: expect.any(Number) },
        ...others.map((key) => ({ status: 'executed', value: key })),
      ]);
      const [answer] = outcome as Array<{ retryAfterMs: number }>;
      // The store's busyRetryAfterMs, less the moments since the answer was made.
      expect(answer?.retryAfterMs).toBeGreaterThan(2500);
      expect(answer?.retryAfterMs).toBeLessThanOrEqual(5000);
      // Bounded by the lock timeout (100 ms, twice: the batch, then the held key alone), not the COMMIT.
      expect(performance.now() - started).toBeLessThan(3000);
      expect(executed).toBe(4);

      held.open();
      expect(await held.run).toMatchObject({ status: 'executed', value: 'from the transaction' });
      // Once committed, the held key replays the transaction's outcome to the engine.
      expect(await engine.run({ key: heldKey, payload: { n: 1 } }, () => 'again')).toEqual({
        status: 'replayed',
        value: 'from the transaction',
      });
      expect(executed).toBe(4);
    });
  });

  it('sends a completions-and-claims call that met a held key as the two batches, applying each item once', async () => {
    const namespace = 'shop';
    const heldKey = newKey('held-cc');
    await whileHeld(namespace, heldKey, async () => {
      // The store called directly, with the storage keys the engine would use.
      const store = postgresStore({ pool: fx.pool, schema: fx.schema, busyRetryAfterMs: 2000 });
      const keys = createIdempotency({ store, namespace });
      const heldStorageKey = keys.storageKeyFor(heldKey);
      const [done, free] = [newKey('done'), newKey('free')].map((k) => keys.storageKeyFor(k));
      const lease = { fingerprint: 'fp', leaseMs: 60_000 };
      const mine = await store.claim(done!, lease);
      if (!mine.claimed) throw new Error('not claimed');
      const before = Date.now();
      const { completed, claimed } = await store.completeAndClaimMany!(
        [{ key: done!, token: mine.token, outcome: Buffer.from('ok'), retentionMs: 60_000 }],
        [
          { key: heldStorageKey, ...lease },
          { key: free!, ...lease },
        ],
      );
      expect(completed).toEqual([true]);
      expect(claimed[0]).toMatchObject({
        claimed: false,
        record: { status: 'in_progress', fingerprint: 'fp', token: 0 },
      });
      const busyUntil = claimed[0]?.claimed === false ? claimed[0].record : undefined;
      expect(
        busyUntil?.status === 'in_progress' && busyUntil.leaseUntil - before,
      ).toBeGreaterThanOrEqual(2000);
      expect(claimed[1]).toMatchObject({ claimed: true, attempt: 1 });
      expect(await store.get(done!)).toMatchObject({ status: 'completed' });
      expect(await store.get(free!)).toMatchObject({ status: 'in_progress', attempt: 1 });
    });
  });

  it('answers a held key repeated in one batch as in progress each time, without waiting', async () => {
    const namespace = 'shop';
    const heldKey = newKey('held-twice');
    await whileHeld(namespace, heldKey, async () => {
      const store = postgresStore({ pool: fx.pool, schema: fx.schema });
      const keys = createIdempotency({ store, namespace });
      const [heldStorageKey, free] = [heldKey, newKey('free')].map((k) => keys.storageKeyFor(k));
      const lease = { fingerprint: 'fp', leaseMs: 60_000 };
      const results = await Promise.race([
        store.claimMany!(
          [heldStorageKey!, free!, heldStorageKey!].map((key) => ({ key, ...lease })),
        ),
        sleep(5000).then(() => 'stalled' as const),
      ]);
      expect(results).toMatchObject([
        { claimed: false, record: { status: 'in_progress', token: 0 } },
        { claimed: true, attempt: 1 },
        { claimed: false, record: { status: 'in_progress', token: 0 } },
      ]);
    });
  });

  it('lets a batched claim of a key claim it once the transaction holding it rolled back', async () => {
    const namespace = 'shop';
    const heldKey = newKey('rolled-back');
    const held = await holdInTransaction(namespace, heldKey, 'rollback');
    const engine = createIdempotency({
      store: postgresStore({ pool: fx.pool, schema: fx.schema }),
      namespace,
      cache: false,
    });
    const busy = await Promise.all(
      [heldKey, newKey('other')].map((key) => engine.run({ key, payload: { n: 1 } }, () => key)),
    );
    expect(busy[0]?.status).toBe('in_progress');
    expect(busy[1]?.status).toBe('executed');
    held.open();
    await expect(held.run).rejects.toThrow('rolled back');
    expect(await engine.run({ key: heldKey, payload: { n: 1 } }, () => 'engine')).toMatchObject({
      status: 'executed',
      value: 'engine',
    });
  });
});

describe('a claim sent alone of a key a transaction holds', () => {
  it('answers in progress within the lock timeout, retry after busyRetryAfterMs, then replays once committed', async () => {
    const namespace = 'shop';
    const heldKey = newKey('held-alone');
    await whileHeld(namespace, heldKey, async (held) => {
      const store = postgresStore({ pool: fx.pool, schema: fx.schema, busyRetryAfterMs: 5000 });
      // batch: false: every claim goes alone, as a lone request's does.
      const engine = createIdempotency({ store, namespace, cache: false, batch: false });
      let executed = 0;
      const started = performance.now();
      const outcome = await Promise.race([
        engine.run({ key: heldKey, payload: { n: 1 } }, () => {
          executed++;
          return 'engine';
        }),
        sleep(5000).then(() => 'stalled' as const),
      ]);
      expect(outcome).toMatchObject({ status: 'in_progress', retryAfterMs: expect.any(Number) });
      const { retryAfterMs } = outcome as { retryAfterMs: number };
      // The store's busyRetryAfterMs, less the moments since the answer was made.
      expect(retryAfterMs).toBeGreaterThan(2500);
      expect(retryAfterMs).toBeLessThanOrEqual(5000);
      // Bounded by the lock timeout (100 ms), not the COMMIT, which waits for this test to open the gate.
      expect(performance.now() - started).toBeLessThan(3000);

      held.open();
      expect(await held.run).toMatchObject({ status: 'executed', value: 'from the transaction' });
      // The client's retry, once the transaction committed, replays its outcome.
      expect(await engine.run({ key: heldKey, payload: { n: 1 } }, () => 'again')).toEqual({
        status: 'replayed',
        value: 'from the transaction',
      });
      expect(executed).toBe(0);
    });
  });

  it('answers in progress when the transaction took over an expired lease (a row lock, not a new row)', async () => {
    const namespace = 'shop';
    const heldKey = newKey('held-takeover');
    const store = postgresStore({ pool: fx.pool, schema: fx.schema, busyRetryAfterMs: 2000 });
    const storageKey = createIdempotency({ store, namespace }).storageKeyFor(heldKey);
    // A crashed engine claim: its 1 ms lease is over by the time the transaction claims the key, which then
    // updates the row (and holds its lock) where a new key's claim inserts one.
    expect((await store.claim(storageKey, { fingerprint: 'crashed', leaseMs: 1 })).claimed).toBe(
      true,
    );
    await sleep(20);
    await whileHeld(namespace, heldKey, async () => {
      const before = Date.now();
      const result = await Promise.race([
        store.claim(storageKey, { fingerprint: 'fp', leaseMs: 60_000 }),
        sleep(5000).then(() => 'stalled' as const),
      ]);
      expect(result).toMatchObject({
        claimed: false,
        record: { status: 'in_progress', fingerprint: 'fp', token: 0 },
      });
      const record = typeof result === 'object' && !result.claimed ? result.record : undefined;
      expect(record?.status === 'in_progress' && record.leaseUntil - before).toBeGreaterThanOrEqual(
        2000,
      );
    });
    // Committed: the record is the transaction's, which took the crashed claim over.
    expect(await store.get(storageKey)).toMatchObject({ status: 'completed' });
  });

  it('lets the retry claim the key once the transaction holding it rolled back', async () => {
    const namespace = 'shop';
    const heldKey = newKey('rolled-back-alone');
    const held = await holdInTransaction(namespace, heldKey, 'rollback');
    const engine = createIdempotency({
      store: postgresStore({ pool: fx.pool, schema: fx.schema }),
      namespace,
      cache: false,
      batch: false,
    });
    try {
      const busy = await Promise.race([
        engine.run({ key: heldKey, payload: { n: 1 } }, () => 'engine'),
        sleep(5000).then(() => 'stalled' as const),
      ]);
      expect(busy).toMatchObject({ status: 'in_progress' });
    } finally {
      held.open();
      await expect(held.run).rejects.toThrow('rolled back');
    }
    expect(await engine.run({ key: heldKey, payload: { n: 1 } }, () => 'engine')).toMatchObject({
      status: 'executed',
      value: 'engine',
    });
  });

  it('leaves the connection’s lock_timeout as it was, and the transactional mode’s statements unbounded', async () => {
    const namespace = 'shop';
    const heldKey = newKey('held-setting');
    const setting = async (db: PgQueryable) =>
      ((await db.query('SHOW lock_timeout')).rows[0] as { lock_timeout: string }).lock_timeout;
    // The pool's connections all start with the server's setting.
    const before = await setting(fx.pool);
    // One connection as the store's pool, so the setting read afterwards is the one the claims ran on.
    const client = await fx.pool.connect();
    try {
      const store = postgresStore({ pool: client, schema: fx.schema });
      const storageKey = createIdempotency({ store, namespace }).storageKeyFor(heldKey);
      expect(await setting(client)).toBe(before);
      await whileHeld(namespace, heldKey, async () => {
        const result = await Promise.race([
          store.claim(storageKey, { fingerprint: 'fp', leaseMs: 60_000 }),
          sleep(5000).then(() => 'stalled' as const),
        ]);
        expect(result).toMatchObject({ claimed: false, record: { token: 0 } });
      });
      // The timed-out claim, then one that claims: the bound ended with each statement's transaction.
      expect(await setting(client)).toBe(before);
      expect(
        (await store.claim(newKey('free'), { fingerprint: 'fp', leaseMs: 60_000 })).claimed,
      ).toBe(true);
      expect(await setting(client)).toBe(before);
    } finally {
      client.release();
    }
    // The transactional mode claims with its own statement: its handler's statements wait as the
    // session's lock_timeout says, not 100 ms.
    const tx = postgresTransactional({ pool: fx.pool, schema: fx.schema, namespace });
    const inHandler = await tx.runInTransaction({ key: newKey('tx-setting') }, async (t) => {
      const { rows } = await t.query<{ lock_timeout: string }>('SHOW lock_timeout');
      return rows[0]?.lock_timeout;
    });
    expect(inHandler).toMatchObject({ status: 'executed', value: before });
    expect(before).not.toBe('100ms');
  });
});
