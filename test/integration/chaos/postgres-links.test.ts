/**
 * The PostgreSQL store and transactional mode with the server blackholed through a TCP proxy (connections
 * stay open, nothing comes back), on a pool bounded as docs/stores/postgres.md says (`query_timeout`,
 * `connectionTimeoutMillis`): every call fails within that bound, no connection is kept, and the key is
 * free once the link heals.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isStoreUnavailableError } from '../../../src/index.js';
import { postgresStore, postgresTransactional } from '../../../src/postgres/index.js';
import { env } from '../../helpers/env.js';
import { type PostgresFixture, setupPostgres } from '../../helpers/postgres-env.js';
import { startTcpProxy, type TcpProxy } from '../../helpers/tcp-proxy.js';

const QUERY_TIMEOUT_MS = 600;

describe('postgres: a blackholed server', () => {
  let fixture: PostgresFixture;
  let proxy: TcpProxy;
  let pool: pg.Pool;

  beforeAll(async () => {
    fixture = await setupPostgres('chaos_links');
    const target = new URL(env.databaseUrl);
    proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port) });
    const through = new URL(env.databaseUrl);
    through.port = String(proxy.port);
    pool = new pg.Pool({
      connectionString: through.href,
      max: 4,
      query_timeout: QUERY_TIMEOUT_MS,
      connectionTimeoutMillis: QUERY_TIMEOUT_MS,
    });
    pool.on('error', () => {});
  });
  afterAll(async () => {
    await pool?.end();
    await proxy?.close();
    await fixture?.dispose();
  });

  /** How long `call` takes to settle, and its error. */
  async function timed(call: () => Promise<unknown>) {
    const startedAt = performance.now();
    const error = await call().then(
      () => undefined,
      (reason: unknown) => reason,
    );
    return { ms: performance.now() - startedAt, error };
  }

  it('a transactional run fails within one query timeout, not two (no ROLLBACK queued behind the lost BEGIN)', async () => {
    // Arrange: a warm connection, so that the BEGIN is sent at once on it.
    const transactional = postgresTransactional({ pool, schema: fixture.schema });
    await transactional.runInTransaction({ key: 'warm-up' }, async () => 'ok');
    proxy.cut();

    // Act
    const { ms, error } = await timed(() =>
      transactional.runInTransaction({ key: 'in-the-cut' }, async () => 'never runs'),
    );
    proxy.restore();

    // Assert: before, the ROLLBACK waited behind the unanswered BEGIN for a second query timeout.
    expect(isStoreUnavailableError(error)).toBe(true);
    expect(ms).toBeLessThan(QUERY_TIMEOUT_MS * 1.5);
    expect(pool.totalCount - pool.idleCount).toBe(0);
    // The link healed: the same key runs at once.
    await expect(
      transactional.runInTransaction({ key: 'in-the-cut' }, async () => 'ran'),
    ).resolves.toMatchObject({ status: 'executed', value: 'ran' });
  });

  it('store claims and completions fail within the query timeout and leave no connection checked out (holds)', async () => {
    const store = postgresStore({ pool, schema: fixture.schema });
    const claimed = await store.claim('a'.repeat(64), { fingerprint: 'f', leaseMs: 30_000 });
    if (!claimed.claimed) throw new Error('the key should be free');
    proxy.cut();

    const claims = await Promise.all(
      ['b', 'c', 'd', 'e', 'f', '0'].map((c) =>
        timed(() => store.claim(c.repeat(64), { fingerprint: 'f', leaseMs: 30_000 })),
      ),
    );
    const completion = await timed(() =>
      store.complete('a'.repeat(64), claimed.token, new Uint8Array([1]), 60_000),
    );
    proxy.restore();

    for (const { ms, error } of [...claims, completion]) {
      expect(isStoreUnavailableError(error)).toBe(true);
      expect(ms).toBeLessThan(QUERY_TIMEOUT_MS * 1.5);
    }
    expect(pool.totalCount - pool.idleCount).toBe(0);
    // The completion is retried once the link healed (as the engine does), and lands.
    await expect(
      store.complete('a'.repeat(64), claimed.token, new Uint8Array([1]), 60_000),
    ).resolves.toBe(true);
  });
});
