/**
 * `retryAfterMs` of a `runInTransaction` duplicate that meets an engine run's live lease, when this
 * process's clock is behind the database's (stepped back an hour: a VM resumed, an NTP step). The lease end
 * is on the database's clock: measured against this process's clock, the wait grew by the whole skew, and a
 * 30 s lease's duplicate was told to come back in an hour (`Retry-After: 3630`). The engine caps it at one
 * lease (test/integration/engine/retry-after-clocks.test.ts); the transactional mode measures it on the
 * database's clock.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { createIdempotency } from '../../../src/index.js';
import { postgresStore, postgresTransactional } from '../../../src/postgres/index.js';
import { deferred } from '../../helpers/deferred.js';
import { type PostgresFixture, setupPostgres } from '../../helpers/postgres-env.js';

let fx: PostgresFixture;
const HOUR = 3_600_000;

beforeAll(async () => {
  fx = await setupPostgres('txretryclock', { max: 4 });
});

afterAll(async () => {
  await fx.dispose();
});

afterEach(() => {
  vi.restoreAllMocks();
});

describe('postgresTransactional meeting an engine run’s lease, its clock an hour behind the database’s', () => {
  it('answers in progress for what is left of the lease, not the lease plus the skew', async () => {
    // Arrange: an engine run holds the key with a 30 s lease.
    const namespace = `ns-${randomUUID()}`;
    const key = `k-${randomUUID()}`;
    const engine = createIdempotency({
      store: postgresStore({ pool: fx.pool, schema: fx.schema }),
      namespace,
      leaseMs: 30_000,
      extendLease: false,
    });
    const started = deferred();
    const gate = deferred();
    const running = engine.run({ key, payload: { n: 1 } }, async () => {
      started.resolve();
      await gate.promise;
      return 'charged';
    });
    await started.promise;
    const tx = postgresTransactional({ pool: fx.pool, schema: fx.schema, namespace });
    const realNow = Date.now.bind(Date);
    try {
      // Act: the same request through the transactional mode, this process's clock an hour behind.
      vi.spyOn(Date, 'now').mockImplementation(() => realNow() - HOUR);
      const outcome = await tx.runInTransaction({ key, payload: { n: 1 } }, () => 'again');
      vi.restoreAllMocks();
      // Assert
      expect(outcome.status).toBe('in_progress');
      const { retryAfterMs } = outcome as { retryAfterMs: number };
      expect(retryAfterMs).toBeGreaterThan(20_000);
      expect(retryAfterMs).toBeLessThanOrEqual(30_000);
    } finally {
      vi.restoreAllMocks();
      gate.resolve();
      await running;
    }
  });
});
