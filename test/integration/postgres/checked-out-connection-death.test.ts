import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { isStoreUnavailableError } from '../../../src/core/errors.js';
import { migrateOutbox, postgresOutboxSource } from '../../../src/outbox/index.js';
import { migrate, postgresStore, postgresTransactional } from '../../../src/postgres/index.js';
import { type FaultProxy, startFaultProxy } from '../../helpers/pg-fault-proxy.js';
import { type PostgresFixture, setupPostgres } from '../../helpers/postgres-env.js';

// A backend terminated while its connection passes from one caller to the next: the FATAL that ends it
// arrives in the same TCP read as the reply that freed the connection. node-postgres listens for a
// connection's 'error' only while it is idle in the pool; a caller that checked it out with
// `await pool.connect()` attached its listener a microtask too late, and the 'error' emitted with nobody
// listening was an uncaught exception that ended the process (seen in CI: "terminating connection due to
// administrator command" out of the PostgreSQL store's tests).

let fx: PostgresFixture;
let proxy: FaultProxy;
let pool: pg.Pool;
const uncaught: unknown[] = [];
const recordUncaught = (error: unknown) => uncaught.push(error);

beforeAll(async () => {
  fx = await setupPostgres('conndeath');
  process.prependListener('uncaughtException', recordUncaught);
});

afterAll(async () => {
  process.removeListener('uncaughtException', recordUncaught);
  await fx.dispose();
});

afterEach(async () => {
  await pool.end();
  await proxy.close();
});

/**
 * Hold every connection of a pool of `max` with slow statements, start `call` (which waits for one of
 * them), and have the first one's backend terminated right behind its slow statement's reply.
 */
async function handOverDying<T>(
  call: (pool: pg.Pool) => Promise<T>,
  max = 1,
): Promise<PromiseSettledResult<T>> {
  proxy = await startFaultProxy();
  pool = new pg.Pool({ connectionString: proxy.url, max });
  pool.on('error', () => {});
  await Promise.all(Array.from({ length: max }, () => pool.query('SELECT pg_sleep(0.05)')));
  const holders = Array.from({ length: max }, (_, i) =>
    pool.query(`SELECT pg_sleep(${0.2 * (i + 1)})`),
  );
  const settled = Promise.allSettled([call(pool)]);
  proxy.arm();
  await Promise.all(holders);
  await proxy.cut();
  const [result] = await settled;
  // Let the closed socket's own events run: a late 'error' with no listener would show up here too.
  await new Promise((resolve) => setTimeout(resolve, 50));
  return result!;
}

function expectUnavailable(result: PromiseSettledResult<unknown>): void {
  expect(uncaught).toEqual([]);
  expect(result.status).toBe('rejected');
  if (result.status === 'rejected') expect(isStoreUnavailableError(result.reason)).toBe(true);
}

describe('a connection whose backend dies as it is handed over', () => {
  it("fails the store's bounded read with StoreUnavailableError instead of crashing the process", async () => {
    const result = await handOverDying((pool) =>
      postgresStore({ pool, schema: fx.schema }).stats(),
    );
    expectUnavailable(result);
  });

  it('fails migrate() with StoreUnavailableError instead of crashing the process', async () => {
    const result = await handOverDying((pool) => migrate(pool, { schema: fx.schema }));
    expectUnavailable(result);
  });

  it('fails a transactional run with StoreUnavailableError instead of crashing the process', async () => {
    let runs = 0;
    const result = await handOverDying((pool) =>
      postgresTransactional({ pool, schema: fx.schema, maxRetries: 0 }).runInTransaction(
        { key: `k-${randomUUID()}`, payload: {} },
        async () => {
          runs++;
          return 'done';
        },
      ),
    );
    expectUnavailable(result);
    expect(runs).toBe(0);
  });

  it('fails migrateOutbox() with StoreUnavailableError instead of crashing the process', async () => {
    const result = await handOverDying((pool) => migrateOutbox(pool, { schema: fx.schema }));
    expect(uncaught).toEqual([]);
    expect(result.status).toBe('rejected');
  });

  it("reports the outbox source's LISTEN connection as broken instead of crashing the process", async () => {
    const errors: unknown[] = [];
    let unsubscribe: (() => Promise<void>) | undefined;
    // The source holds one connection in LISTEN and needs a pool of two.
    const result = await handOverDying(async (pool) => {
      const source = postgresOutboxSource({ pool, schema: fx.schema, reconnectDelayMs: 60_000 });
      unsubscribe = await source.subscribe?.(
        () => {},
        (error) => errors.push(error),
      );
    }, 2);
    expect(uncaught).toEqual([]);
    expect(result.status).toBe('fulfilled');
    expect(errors.length).toBeGreaterThan(0);
    await unsubscribe?.();
  });
});
