/**
 * A session that holds (or awaits) a lock on the records table itself (a manual `ALTER TABLE`, `LOCK TABLE`,
 * `VACUUM FULL`), on the real server: a claim (and a release) must fail within a bound, as the store
 * unavailable (HTTP 503 + Retry-After, a consumer's redelivery later), instead of waiting for that session,
 * each call on a pool connection of its own until every request hangs. And such a lock timeout is never "in
 * progress" (409, as if another request held the key): only a row another transaction holds is. Calls that
 * come after the handler's effect (complete, extend, saveStep) wait instead: giving up would hand the key to
 * a retry that runs the handler again.
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIdempotency, isStoreUnavailableError } from '../../../src/index.js';
import {
  type PostgresStore,
  postgresStore,
  postgresTransactional,
} from '../../../src/postgres/index.js';
import { env } from '../../helpers/env.js';
import {
  applyMigrations,
  type PostgresFixture,
  setupPostgres,
  uniqueSchema,
} from '../../helpers/postgres-env.js';

let fx: PostgresFixture;
const newKey = (label: string) => `${label}-${randomUUID()}`;
const lease = { fingerprint: 'fp', leaseMs: 60_000 };
// Far above the 100 ms bound, far below the test's timeout: a call still waiting then is a hang.
const HANG_MS = 3000;

beforeAll(async () => {
  fx = await setupPostgres('tablelock', { max: 8 });
});

afterAll(async () => {
  await fx.dispose();
});

/**
 * Run `body` while another session holds `schema`'s records table in ACCESS EXCLUSIVE mode (what
 * `ALTER TABLE` and `VACUUM FULL` take), then release it, whatever `body` did.
 */
async function whileTableLocked(schema: string, body: () => Promise<void>): Promise<void> {
  const locker = new pg.Client({ connectionString: env.databaseUrl });
  await locker.connect();
  try {
    await locker.query('BEGIN');
    await locker.query(`LOCK TABLE "${schema}".idempotency_records IN ACCESS EXCLUSIVE MODE`);
    await body();
  } finally {
    await locker.query('ROLLBACK').catch(() => {});
    await locker.end();
  }
}

/** How `promise` settled within {@link HANG_MS}: its value, its error, or `'hung'`. */
async function settledWithin<T>(
  promise: Promise<T>,
): Promise<{ value: T } | { error: unknown } | 'hung'> {
  const settled = promise.then(
    (value) => ({ value }),
    (error: unknown) => ({ error }),
  );
  return Promise.race([settled, sleep(HANG_MS).then(() => 'hung' as const)]);
}

/** The error `promise` rejected with within {@link HANG_MS} (failing the test on a hang or a result). */
async function errorWithin(promise: Promise<unknown>): Promise<unknown> {
  const settled = await settledWithin(promise);
  expect(settled).not.toBe('hung');
  expect(settled).not.toHaveProperty('value');
  return (settled as { error: unknown }).error;
}

describe('postgresStore while a session holds the records table', () => {
  it('fails a claim sent alone within its bound, as the store unavailable', async () => {
    const store = postgresStore({ pool: fx.pool, schema: fx.schema });
    await whileTableLocked(fx.schema, async () => {
      // Act
      const startedAt = Date.now();
      const error = await errorWithin(store.claim(newKey('alone'), lease));
      // Assert
      expect(isStoreUnavailableError(error)).toBe(true);
      expect((error as Error).message).toMatch(/lock timeout.*pg_locks/);
      expect(Date.now() - startedAt).toBeLessThan(HANG_MS);
    });
  });

  it('fails a batch of claims as the store unavailable, not each key in progress', async () => {
    const store = postgresStore({ pool: fx.pool, schema: fx.schema });
    await whileTableLocked(fx.schema, async () => {
      // Act
      const error = await errorWithin(
        store.claimMany?.([
          { key: newKey('a'), ...lease },
          { key: newKey('b'), ...lease },
        ]) ?? Promise.resolve(),
      );
      // Assert: the whole statement rolled back, nothing was applied.
      expect(isStoreUnavailableError(error)).toBe(true);
    });
  });

  it('has completions sent together with claims wait for the lock and apply, never giving up after the effect', async () => {
    // Arrange: a claim to complete, taken before the table was locked.
    const store = postgresStore({ pool: fx.pool, schema: fx.schema });
    const key = newKey('done');
    const claim = await store.claim(key, lease);
    if (!claim.claimed) throw new Error('expected a claim');
    const others = [newKey('c'), newKey('d')];
    let pending: Promise<unknown> = Promise.resolve();
    let settledEarly = false;
    await whileTableLocked(fx.schema, async () => {
      // Act
      pending =
        store.completeAndClaimMany?.(
          [{ key, token: claim.token, outcome: new Uint8Array([1]), retentionMs: 60_000 }],
          others.map((other) => ({ key: other, ...lease })),
        ) ?? Promise.reject(new Error('no completeAndClaimMany'));
      pending.then(
        () => {
          settledEarly = true;
        },
        () => {
          settledEarly = true;
        },
      );
      await sleep(600);
      // Assert: still waiting, neither applied nor given up.
      expect(settledEarly).toBe(false);
    });
    // Once the lock is gone the completion is applied, and the claims after it.
    expect(await pending).toMatchObject({
      completed: [true],
      claimed: [{ claimed: true }, { claimed: true }],
    });
    expect(await store.get(key)).toMatchObject({ status: 'completed', token: claim.token });
  });

  it('fails release within its bound as the store unavailable, applying nothing', async () => {
    // Arrange: a claim taken before the table was locked.
    const store = postgresStore({ pool: fx.pool, schema: fx.schema });
    const key = newKey('held-table');
    const claim = await store.claim(key, lease);
    if (!claim.claimed) throw new Error('expected a claim');
    await whileTableLocked(fx.schema, async () => {
      // Act
      const error = await errorWithin(store.release(key, claim.token));
      // Assert
      expect(isStoreUnavailableError(error)).toBe(true);
    });
    // Nothing was applied: the claim is as it was (left to its lease, no second run), and its holder can
    // still complete it.
    expect(await store.get(key)).toMatchObject({ status: 'in_progress', token: claim.token });
    expect(await store.complete(key, claim.token, new Uint8Array([2]), 60_000)).toBe(true);
  });

  // These come after the handler's effect: giving up after 100 ms would let the lease run out behind the
  // lock and the retry run the handler again (a second charge). They wait in the lock queue instead, ahead
  // of any retry's claim, and apply once the lock is gone.
  it.each([
    [
      'complete',
      (store: PostgresStore, key: string, token: number) =>
        store.complete(key, token, new Uint8Array([1]), 60_000),
      'completed',
    ],
    [
      'extend',
      (store: PostgresStore, key: string, token: number) => store.extend(key, token, 60_000),
      'in_progress',
    ],
    [
      'saveStep',
      (store: PostgresStore, key: string, token: number) =>
        store.saveStep(key, token, 'charge', new Uint8Array([1])),
      'in_progress',
    ],
    [
      // Not after an effect, but a takeover's handler that failed to load its steps would throw, and the
      // engine would release the claim and the steps recorded before it: a retry would run them again.
      'loadSteps',
      (store: PostgresStore, key: string, token: number) => store.loadSteps(key, token),
      'in_progress',
    ],
    [
      'completeMany',
      (store: PostgresStore, key: string, token: number) =>
        store.completeMany!([
          { key, token, outcome: new Uint8Array([1]), retentionMs: 60_000 },
          { key: `${key}-other`, token, outcome: new Uint8Array([1]), retentionMs: 60_000 },
        ]),
      'completed',
    ],
  ] as const)(
    'has %s wait for the table lock and apply once it is released, never giving up after the effect',
    async (_, call, status) => {
      // Arrange: a claim taken before the table was locked.
      const store = postgresStore({ pool: fx.pool, schema: fx.schema });
      const key = newKey('waits-table');
      const claim = await store.claim(key, lease);
      if (!claim.claimed) throw new Error('expected a claim');
      let pending: Promise<unknown> = Promise.resolve();
      let settledEarly = false;
      await whileTableLocked(fx.schema, async () => {
        // Act: sent while the table is locked, past the claims' 100 ms bound.
        pending = call(store, key, claim.token);
        pending.then(
          () => {
            settledEarly = true;
          },
          () => {
            settledEarly = true;
          },
        );
        await sleep(600);
        // Assert: still waiting, neither applied nor given up.
        expect(settledEarly).toBe(false);
      });
      // Once the lock is gone it applies, with the lease judged from when it was sent.
      await expect(pending).resolves.toBeDefined();
      expect(await store.get(key)).toMatchObject({ status, token: claim.token });
    },
  );

  it('has the engine reject a run with StoreUnavailableError (503 over HTTP) before running it', async () => {
    // Arrange
    const idempotency = createIdempotency({
      store: postgresStore({ pool: fx.pool, schema: fx.schema }),
      namespace: newKey('ns'),
    });
    let ran = false;
    await whileTableLocked(fx.schema, async () => {
      // Act
      const error = await errorWithin(
        idempotency.run({ key: newKey('run') }, async () => {
          ran = true;
          return 'charged';
        }),
      );
      // Assert
      expect(isStoreUnavailableError(error)).toBe(true);
      expect(ran).toBe(false);
    });
  });

  it('still answers a key whose row another transaction holds as in progress', async () => {
    // Arrange: a transaction holds the key's row (uncommitted), not the table.
    const store = postgresStore({ pool: fx.pool, schema: fx.schema, busyRetryAfterMs: 1500 });
    const key = newKey('held');
    const holder = new pg.Client({ connectionString: env.databaseUrl });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query(
        `INSERT INTO "${fx.schema}".idempotency_records (key, status, fingerprint, token, attempt, created_at, expires_at)
         VALUES ($1, 'in_progress', 'fp', 1, 1, now(), now() + interval '1 minute')`,
        [key],
      );
      // Act
      const settled = await settledWithin(store.claim(key, lease));
      // Assert
      expect(settled).toMatchObject({
        value: { claimed: false, record: { status: 'in_progress', token: 0 } },
      });
    } finally {
      await holder.query('ROLLBACK').catch(() => {});
      await holder.end();
    }
  });
});

describe('postgresStore claims queued on a row, which PostgreSQL names no row for', () => {
  it('answers them in progress, not unavailable: the table is not locked', async () => {
    // Arrange: a committed claim whose row a transaction keeps locked (as a running claim of it does):
    // the first claim behind it waits for that transaction, the others on the row's tuple lock.
    const store = postgresStore({ pool: fx.pool, schema: fx.schema });
    const key = newKey('queued');
    const free = newKey('free');
    await store.claim(key, lease);
    const holder = new pg.Client({ connectionString: env.databaseUrl });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query(
        `SELECT 1 FROM "${fx.schema}".idempotency_records WHERE key = $1 FOR UPDATE`,
        [key],
      );
      // Act: four claims alone, and a batch with a free key.
      const settled = await settledWithin(
        Promise.all([
          ...Array.from({ length: 4 }, () => store.claim(key, lease)),
          store.claimMany!([
            { key, ...lease },
            { key: free, ...lease },
          ]),
        ]),
      );
      // Assert
      expect(settled).toHaveProperty('value');
      const results = (settled as { value: unknown[] }).value;
      const inProgress = { claimed: false, record: { status: 'in_progress' } };
      expect(results.slice(0, 4)).toMatchObject(Array(4).fill(inProgress));
      expect(results[4]).toMatchObject([inProgress, { claimed: true }]);
    } finally {
      await holder.query('ROLLBACK').catch(() => {});
      await holder.end();
    }
  });
});

describe('postgresTransactional with lockTimeoutMs while a session holds the records table', () => {
  it('rejects with StoreUnavailableError, not in progress as if another request held the key', async () => {
    // Arrange
    const tx = postgresTransactional({ pool: fx.pool, schema: fx.schema, lockTimeoutMs: 100 });
    let ran = false;
    await whileTableLocked(fx.schema, async () => {
      // Act
      const settled = await settledWithin(
        tx.runInTransaction({ key: newKey('tx') }, async () => {
          ran = true;
          return 'charged';
        }),
      );
      // Assert
      expect(settled).not.toBe('hung');
      expect(settled).not.toHaveProperty('value');
      expect(isStoreUnavailableError((settled as { error: unknown }).error)).toBe(true);
      expect(ran).toBe(false);
    });
  });
});

describe('postgresStore on a schema migrated up to 0007 (no claim_one)', () => {
  const schema = uniqueSchema('tablelock7');
  // The connection's own lock_timeout is the only bound on the table's lock there.
  const pool = new pg.Pool({
    connectionString: env.databaseUrl,
    max: 4,
    options: '-c lock_timeout=200',
  });
  pool.on('error', () => {});

  beforeAll(async () => {
    await applyMigrations(pool, schema, 1, 7);
  });

  afterAll(async () => {
    await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await pool.end();
  });

  it('claims with claim-bounded.sql instead, and still tells a held row from a held table', async () => {
    // Arrange
    const store = postgresStore({ pool, schema });
    const key = newKey('old');
    // Act / Assert: the fallback claims, and answers the same key in progress.
    expect(await store.claim(key, lease)).toMatchObject({ claimed: true });
    expect(await store.claim(key, lease)).toMatchObject({ claimed: false });
    await whileTableLocked(schema, async () => {
      const error = await errorWithin(store.claim(newKey('old'), lease));
      expect(isStoreUnavailableError(error)).toBe(true);
    });
  });

  it('warns once per table that its claims wait for the table lock without bound', async () => {
    // Arrange: a table of its own (no store has claimed on it yet in this process). The fallback is silent
    // otherwise, and without a connection lock_timeout it hangs every request on a table lock: the warning
    // names the cause before that incident.
    const own = uniqueSchema('tablelock7w');
    await applyMigrations(pool, own, 1, 7);
    const warnings: Error[] = [];
    const onWarning = (warning: Error) => warnings.push(warning);
    process.on('warning', onWarning);
    try {
      // Act: two stores on the table, two claims each.
      for (const store of [
        postgresStore({ pool, schema: own }),
        postgresStore({ pool, schema: own }),
      ]) {
        await store.claim(newKey('warn'), lease);
        await store.claim(newKey('warn'), lease);
      }
      await new Promise((resolve) => setImmediate(resolve));
    } finally {
      process.off('warning', onWarning);
      await pool.query(`DROP SCHEMA IF EXISTS "${own}" CASCADE`);
    }
    // Assert: one warning, with its code, naming the table and the missing function.
    const ours = warnings.filter(
      (warning) =>
        (warning as { code?: string }).code === 'IDEMPOTENCY_KIT_POSTGRES_UNBOUNDED_CLAIMS',
    );
    expect(ours).toHaveLength(1);
    expect(ours[0]?.message).toContain(`${own}.idempotency_records_claim_one`);
  });
});
