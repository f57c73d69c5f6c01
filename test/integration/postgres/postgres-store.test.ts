import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isInvalidOptionsError, isStoreUnavailableError } from '../../../src/index.js';
import { type PgQueryable, postgresStore } from '../../../src/postgres/index.js';
import {
  type PostgresFixture,
  setupPostgres,
  testPool,
  transactionClaims,
} from '../../helpers/postgres-env.js';

let fx: PostgresFixture;
const day = 86_400_000;
const key = (label: string) => `${label}:${randomUUID()}`;

beforeAll(async () => {
  fx = await setupPostgres('store', { max: 8 });
});

afterAll(async () => {
  await fx.dispose();
});

describe('postgresStore claim statement', () => {
  it('returns the row committed after its snapshot by running the statement again', async () => {
    // A transaction inserts the claim and keeps it uncommitted; a second claim blocks on the unique
    // index, and the first commits a completion meanwhile. The second claim's snapshot predates that
    // commit, so its statement finds no row once and must run again to report the completed record.
    // Both claim with claim.sql (the transactional mode's): the store's claim-bounded.sql gives up after
    // 100 ms, too short to hold the wait here on a loaded machine, and is claim.sql with that timeout
    // only (test/unit/postgres/lone-claim.test.ts), run by the same loop.
    const store = postgresStore({ pool: fx.pool, schema: fx.schema });
    const k = key('pitfall');
    const holder = await fx.pool.connect();
    let emptyResults = 0;
    const counting: PgQueryable = {
      async query(text, values) {
        const result = await fx.pool.query(text, values as unknown[]);
        if (text.includes('INSERT INTO') && result.rows.length === 0) emptyResults++;
        return result;
      },
    };
    try {
      await holder.query('BEGIN');
      const holderStore = transactionClaims(holder, fx.schema);
      const first = await holderStore.claim(k, { fingerprint: 'fp', leaseMs: 60_000 });
      expect(first.claimed).toBe(true);
      const blocked = transactionClaims(counting, fx.schema).claim(k, {
        fingerprint: 'fp',
        leaseMs: 60_000,
      });
      // Let the second claim reach the server and start waiting on the uncommitted row.
      await waitForLockWait(fx.pool, fx.schema);
      if (!first.claimed) return;
      expect(await holderStore.complete(k, first.token, Buffer.from('done'), day)).toBe(true);
      await holder.query('COMMIT');
      const second = await blocked;
      expect(second.claimed).toBe(false);
      if (second.claimed) return;
      expect(second.record.status).toBe('completed');
      expect(emptyResults).toBeGreaterThanOrEqual(1);
      expect((await store.get(k))?.status).toBe('completed');
    } finally {
      holder.release();
    }
  });

  it('keeps tokens increasing across release and re-claim by many callers', async () => {
    const store = postgresStore({ pool: fx.pool, schema: fx.schema });
    const k = key('tokens');
    let last = 0;
    for (let i = 0; i < 20; i++) {
      const claim = await store.claim(k, { fingerprint: 'fp', leaseMs: 60_000 });
      expect(claim.claimed).toBe(true);
      if (!claim.claimed) return;
      expect(claim.token).toBeGreaterThan(last);
      last = claim.token;
      expect(await store.release(k, claim.token)).toBe(true);
    }
  });
});

describe('postgresStore options', () => {
  it('refuses schema and table names that are not plain identifiers', () => {
    for (const bad of ['x"; DROP TABLE y; --', 'a.b', '1abc', '', 'a-b', 'a'.repeat(49)]) {
      expect(() => postgresStore({ pool: fx.pool, table: bad })).toThrow(/table must be/);
    }
    try {
      postgresStore({ pool: fx.pool, schema: 'public; --' });
      expect.unreachable();
    } catch (error) {
      expect(isInvalidOptionsError(error)).toBe(true);
    }
  });

  it('fails closed with a hint to migrate when the table does not exist', async () => {
    const store = postgresStore({ pool: fx.pool, schema: fx.schema, table: 'never_migrated' });
    const error = await store
      .claim(key('none'), { fingerprint: 'fp', leaseMs: 1000 })
      .catch((e) => e);
    expect(isStoreUnavailableError(error)).toBe(true);
    expect(String(error.message)).toMatch(/migrate/);
    expect(error.cause).toBeDefined();
  });
});

describe('postgresStore connection loss', () => {
  it('rejects with StoreUnavailableError when backends are terminated mid-run, then recovers', async () => {
    const applicationName = `ik-terminate-${process.pid}-${randomUUID().slice(0, 6)}`;
    const pool = testPool({ max: 4, applicationName });
    const store = postgresStore({ pool, schema: fx.schema });
    try {
      // Warm the pool so every connection has a backend to terminate.
      await Promise.all(
        Array.from({ length: 8 }, () =>
          store.claim(key('warm'), { fingerprint: 'f', leaseMs: 60_000 }),
        ),
      );
      const errors: unknown[] = [];
      let stop = false;
      const load = Promise.all(
        Array.from({ length: 8 }, async () => {
          while (!stop) {
            try {
              // Eight lanes keep statements in flight, so the termination hits some mid-query.
              await store.stats();
              await store.claim(key('load'), { fingerprint: 'f', leaseMs: 60_000 });
            } catch (error) {
              errors.push(error);
            }
          }
        }),
      );
      await sleep(200);
      for (let i = 0; i < 3 && errors.length === 0; i++) {
        await fx.pool.query(
          'SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1',
          [applicationName],
        );
        await sleep(200);
      }
      stop = true;
      await load;
      expect(errors.length).toBeGreaterThan(0);
      for (const error of errors) {
        expect(isStoreUnavailableError(error)).toBe(true);
        expect((error as Error).cause).toBeDefined();
      }
      // Recovery: the pool replaced the dead connections and the store works again.
      const k = key('after');
      const claim = await store.claim(k, { fingerprint: 'f', leaseMs: 60_000 });
      expect(claim.claimed).toBe(true);
      if (claim.claimed)
        expect(await store.complete(k, claim.token, Buffer.from('ok'), day)).toBe(true);
    } finally {
      await pool.end();
    }
  });

  it('rejects with StoreUnavailableError when the server cannot be reached', async () => {
    const pg = await import('pg');
    const pool = new pg.default.Pool({
      connectionString: 'postgres://postgres@127.0.0.1:1/test',
      connectionTimeoutMillis: 2000,
    });
    pool.on('error', () => {});
    try {
      const error = await postgresStore({ pool })
        .claim(key('down'), { fingerprint: 'f', leaseMs: 1000 })
        .catch((e) => e);
      expect(isStoreUnavailableError(error)).toBe(true);
      expect(error.cause).toBeDefined();
    } finally {
      await pool.end();
    }
  });
});

describe('postgresStore purge', () => {
  it('purges dead rows while concurrent claims take over keys, never deleting a live lease', async () => {
    const store = postgresStore({ pool: fx.pool, schema: fx.schema });
    const keys = Array.from({ length: 150 }, (_, i) => key(`purge${i}`));
    const untouched = Array.from({ length: 40 }, (_, i) => key(`untouched${i}`));
    // Arrange: every key starts dead (an expired lease or an expired outcome).
    for (const [i, k] of [...keys, ...untouched].entries()) {
      const claim = await store.claim(k, { fingerprint: 'fp', leaseMs: i % 2 === 0 ? 30 : 60_000 });
      if (claim.claimed && i % 2 === 1) await store.complete(k, claim.token, Buffer.from('x'), 30);
    }
    await sleep(120);

    // Act: purge in small batches while two claims per key race to take each key over.
    let purging = true;
    let purged = 0;
    const purger = (async () => {
      while (purging) purged += await store.purgeExpired({ limit: 7 });
    })();
    const claims = await Promise.all(
      keys.flatMap((k) =>
        [1, 2].map(async () => ({
          k,
          r: await store.claim(k, { fingerprint: 'new', leaseMs: 60_000 }),
        })),
      ),
    );
    purging = false;
    await purger;
    for (let n = await store.purgeExpired({ limit: 1000 }); n > 0; n = await store.purgeExpired()) {
      purged += n;
    }

    // Assert: one winner per key, every winner still holds a live lease, and the dead rows are gone.
    for (const k of keys) {
      const winners = claims.filter((c) => c.k === k && c.r.claimed);
      expect(winners, k).toHaveLength(1);
      const win = winners[0]!.r;
      if (!win.claimed) continue;
      expect(await store.extend(k, win.token, 60_000), k).toBe(true);
    }
    expect(purged).toBeGreaterThanOrEqual(untouched.length);
    const { rows } = await fx.pool.query(
      `SELECT count(*)::int AS n FROM "${fx.schema}".idempotency_records WHERE expires_at <= now()`,
    );
    expect(rows[0].n).toBe(0);
  });

  it('purges a reserved dead lease once its reservation ends, and a completed row whatever it reserved', async () => {
    // Arrange: a crashed claim reserved for 1.5 s, and a claim reserved for an hour then completed with a
    // 1 ms retention (a completed row keeps its reserved_until, which means nothing there).
    const store = postgresStore({ pool: fx.pool, schema: fx.schema });
    const [crashedKey, doneKey] = [key('reserved-purge'), key('reserved-done')];
    const crashed = await store.claim(crashedKey, {
      fingerprint: 'fp',
      leaseMs: 50,
      reserveMs: 1_500,
    });
    const done = await store.claim(doneKey, {
      fingerprint: 'fp',
      leaseMs: 60_000,
      reserveMs: 3_600_000,
    });
    if (!crashed.claimed || !done.claimed) throw new Error('expected two claims');
    expect(await store.complete(doneKey, done.token, Buffer.from('x'), 1)).toBe(true);
    const exists = async (k: string) =>
      (
        await fx.pool.query(
          `SELECT count(*)::int AS n FROM "${fx.schema}".idempotency_records WHERE key = $1`,
          [k],
        )
      ).rows[0].n === 1;
    await sleep(150);
    // Act: purge while the lease is dead but still reserved.
    while ((await store.purgeExpired({ limit: 1000 })) > 0) {}
    // Assert: the reserved dead lease stays, the expired outcome is gone.
    expect(await exists(crashedKey)).toBe(true);
    expect(await exists(doneKey)).toBe(false);
    expect(await store.get(crashedKey)).toBeUndefined();
    // Act: purge again once the reservation has ended.
    await sleep(1_500);
    while ((await store.purgeExpired({ limit: 1000 })) > 0) {}
    // Assert: deleted now, so another request claims the key afresh (attempt 1, a larger token).
    expect(await exists(crashedKey)).toBe(false);
    const next = await store.claim(crashedKey, { fingerprint: 'other', leaseMs: 60_000 });
    expect(next).toMatchObject({ claimed: true, attempt: 1 });
    expect(next.claimed && next.token).toBeGreaterThan(crashed.token);
    await store.delete(crashedKey);
  });

  it('rejects a purge limit that is not a positive integer', async () => {
    const store = postgresStore({ pool: fx.pool, schema: fx.schema });
    await expect(store.purgeExpired({ limit: 0 })).rejects.toThrow(/positive integer/);
  });
});

/** Wait until a statement on `schema` is waiting on a lock (the blocked claim). */
async function waitForLockWait(
  pool: PgQueryable,
  schema: string,
  timeoutMs = 10_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    // Only statements naming this run's schema count: other test runs share the server.
    const { rows } = await pool.query(
      "SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND position($1 in query) > 0",
      [schema],
    );
    if ((rows[0] as { n: number }).n > 0) return;
    await sleep(20);
  }
  throw new Error('no backend started waiting on a lock');
}
