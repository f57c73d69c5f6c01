/**
 * A long handler whose link to PostgreSQL stalls (a TCP proxy that stops forwarding) while another process
 * reaches the server: its heartbeat's extension hangs up to the pool's `query_timeout`, the lease runs out,
 * and the other process takes the key over. The stalled handler's signal must abort at its lease's end,
 * before the takeover runs, not once the hung extension finally fails.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIdempotency } from '../../../src/index.js';
import { postgresStore } from '../../../src/postgres/index.js';
import { env } from '../../helpers/env.js';
import { type PostgresFixture, setupPostgres } from '../../helpers/postgres-env.js';
import { startTcpProxy, type TcpProxy } from '../../helpers/tcp-proxy.js';

const LEASE_MS = 3000;
// Longer than the lease: the heartbeat's extension sent into the stall outlives it.
const QUERY_TIMEOUT_MS = 10_000;

describe('a heartbeat whose extension hangs on a stalled link', () => {
  let fixture: PostgresFixture;
  let proxy: TcpProxy;
  let stalled: pg.Pool;

  beforeAll(async () => {
    fixture = await setupPostgres('stalled_extension');
    const target = new URL(env.databaseUrl);
    proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port) });
    const through = new URL(env.databaseUrl);
    through.port = String(proxy.port);
    stalled = new pg.Pool({
      connectionString: through.href,
      max: 2,
      query_timeout: QUERY_TIMEOUT_MS,
      connectionTimeoutMillis: QUERY_TIMEOUT_MS,
    });
    stalled.on('error', () => {});
  });
  afterAll(async () => {
    proxy?.restore();
    await stalled?.end();
    await proxy?.close();
    await fixture?.dispose();
  });

  it('aborts the handler at its lease end, before another process takes the key over', async () => {
    // Arrange: A runs a long handler through the proxy; B reaches the server directly.
    const a = createIdempotency({
      store: postgresStore({ pool: stalled, schema: fixture.schema }),
      leaseMs: LEASE_MS,
    });
    const b = createIdempotency({
      store: postgresStore({ pool: fixture.pool, schema: fixture.schema }),
      leaseMs: LEASE_MS,
    });
    let abortedAt: number | undefined;
    let takenOverAt: number | undefined;
    let release!: () => void;
    const handlerMayEnd = new Promise<void>((resolve) => {
      release = resolve;
    });
    const runA = a
      .run({ key: 'stalled-extension' }, async (context) => {
        context.signal.addEventListener('abort', () => {
          abortedAt = performance.now();
        });
        // Claimed: the link stalls before the first heartbeat (a third of the lease at the soonest).
        proxy.cut();
        await handlerMayEnd;
        return 'a';
      })
      .catch((error: unknown) => error);

    // Act: B retries the key until it runs (once A's lease has run out in the store).
    const deadline = performance.now() + LEASE_MS * 3;
    while (takenOverAt === undefined && performance.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      await b.run({ key: 'stalled-extension' }, async () => {
        takenOverAt = performance.now();
        return 'b';
      });
    }
    release();
    proxy.restore();
    await runA;

    // Assert: before, A's signal aborted only when the hung extension failed, a query timeout later,
    // while B ran beside it.
    expect(takenOverAt).toBeDefined();
    expect(abortedAt).toBeDefined();
    expect(abortedAt as number).toBeLessThanOrEqual(takenOverAt as number);
  });
});
