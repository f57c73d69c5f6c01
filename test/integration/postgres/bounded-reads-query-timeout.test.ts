/**
 * The store's bounded reads (`get`, the health probe; see `src/postgres/bounded-lock-wait.ts`) when the
 * server stops answering and the pool's `query_timeout` ends the wait: node-postgres stops waiting, but
 * the statement was sent and the connection stays busy with it. A ROLLBACK sent after it queued behind it
 * and failed only after a second timeout: the probe took twice `query_timeout` to report the outage.
 */
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { isStoreUnavailableError } from '../../../src/index.js';
import { postgresStore } from '../../../src/postgres/index.js';
import { type FaultProxy, startFaultProxy } from '../../helpers/pg-fault-proxy.js';
import { type PostgresFixture, setupPostgres } from '../../helpers/postgres-env.js';

const QUERY_TIMEOUT_MS = 1_500;

let fx: PostgresFixture;
let proxy: FaultProxy;
let pool: pg.Pool;

beforeAll(async () => {
  fx = await setupPostgres('boundedtimeout');
});

afterAll(async () => {
  await fx.dispose();
});

afterEach(async () => {
  await proxy.close();
  await pool.end();
});

describe('a bounded read on a server that stopped answering', () => {
  it('fails within one query_timeout, not two, and discards the connection', async () => {
    proxy = await startFaultProxy();
    pool = new pg.Pool({ connectionString: proxy.url, max: 1, query_timeout: QUERY_TIMEOUT_MS });
    pool.on('error', () => {});
    const store = postgresStore({ pool, schema: fx.schema });
    expect(await store.get('warm')).toBeUndefined();

    proxy.stall();
    const startedAt = performance.now();
    const error = await store.get('x').catch((e: unknown) => e);
    const elapsedMs = performance.now() - startedAt;

    expect(isStoreUnavailableError(error)).toBe(true);
    // One timeout and some slack for a loaded machine; a ROLLBACK queued behind it would add a second.
    expect(elapsedMs).toBeLessThan(QUERY_TIMEOUT_MS * 1.7);
    // The busy connection was discarded, not handed back to serve the next call.
    expect(pool.totalCount).toBe(0);
  });
});
