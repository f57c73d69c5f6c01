/**
 * The store's reads and admin calls while another session holds the records table (`LOCK TABLE … ACCESS
 * EXCLUSIVE`, what `ALTER TABLE` and `VACUUM FULL` take), on the real server. Each waited as long as the lock
 * lasted, on a pool connection of its own: a health probe (`get`) hung, and so did `inspect`, the admin
 * listing and `purgeExpired`. They now give up after 100 ms as the store unavailable, nothing applied (see
 * `src/postgres/bounded-lock-wait.ts`), and leave the pool's connections as they found them.
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isStoreUnavailableError } from '../../../src/index.js';
import { type PostgresStore, postgresStore } from '../../../src/postgres/index.js';
import { env } from '../../helpers/env.js';
import { type PostgresFixture, setupPostgres } from '../../helpers/postgres-env.js';

let fx: PostgresFixture;
const lease = { fingerprint: 'fp', leaseMs: 60_000 };
// Far above the 100 ms bound, far below the test's timeout: a call still waiting then is a hang.
const HANG_MS = 3000;

beforeAll(async () => {
  fx = await setupPostgres('boundedreads', { max: 4 });
});

afterAll(async () => {
  await fx.dispose();
});

/** Run `body` while another session holds `schema`'s records table in ACCESS EXCLUSIVE mode. */
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

describe('postgresStore reads and admin calls while a session holds the records table', () => {
  it.each([
    ['get', (store: PostgresStore, key: string) => store.get(key)],
    ['inspect', (store: PostgresStore, key: string) => store.inspect(key)],
    ['listCrashed', (store: PostgresStore) => store.listCrashed({ limit: 10 })],
    ['stats', (store: PostgresStore) => store.stats()],
    ['delete', (store: PostgresStore, key: string) => store.delete(key)],
    ['purgeExpired', (store: PostgresStore) => store.purgeExpired({ limit: 10 })],
  ] as const)(
    'fails %s within its bound as the store unavailable, applying nothing',
    async (_, call) => {
      // Arrange: a record taken before the table was locked.
      const store = postgresStore({ pool: fx.pool, schema: fx.schema });
      const key = `read-${randomUUID()}`;
      const claim = await store.claim(key, lease);
      if (!claim.claimed) throw new Error('expected a claim');
      await whileTableLocked(fx.schema, async () => {
        // Act
        const startedAt = Date.now();
        const settled = await Promise.race([
          call(store, key).then(
            (value) => ({ value }),
            (error: unknown) => ({ error }),
          ),
          sleep(HANG_MS).then(() => 'hung' as const),
        ]);
        // Assert: given up (not hung, no answer), as an outage.
        expect(settled).not.toBe('hung');
        expect(settled).not.toHaveProperty('value');
        expect(isStoreUnavailableError((settled as { error: unknown }).error)).toBe(true);
        expect(Date.now() - startedAt).toBeLessThan(1000);
      });
      // Nothing was applied (delete removed nothing), and the pool's connections kept their settings: the
      // same calls answer once the lock is gone, and a read waits for a later lock as it is told to.
      expect(await store.get(key)).toMatchObject({ status: 'in_progress', token: claim.token });
      const { rows } = await fx.pool.query("SELECT current_setting('lock_timeout') AS value");
      expect(rows[0]).toEqual({ value: '0' });
    },
  );
});
