/**
 * A transactional run that ran out of serialization retries answers `StoreUnavailableError` (HTTP 503), as
 * a store outage does: it is reported as one, once (`onStoreError`, so `idempotency_store_errors_total`),
 * not left out of every metric, nor reported for each retried attempt.
 */
import { randomUUID } from 'node:crypto';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { combineHooks, isStoreUnavailableError } from '../../../src/index.js';
import { postgresTransactional } from '../../../src/postgres/index.js';
import { prometheusHooks } from '../../../src/prometheus/index.js';
import { type PostgresFixture, setupPostgres } from '../../helpers/postgres-env.js';

describe('a PostgreSQL transactional run out of serialization retries', () => {
  let fx: PostgresFixture;

  beforeAll(async () => {
    fx = await setupPostgres('obs_tx_giveup');
  });

  afterAll(async () => {
    await fx?.dispose();
  });

  it('is counted as one store error of the phase that failed', async () => {
    const registry = new Registry();
    const storeErrors: string[] = [];
    const tx = postgresTransactional({
      pool: fx.pool,
      schema: fx.schema,
      maxRetries: 2,
      hooks: combineHooks(prometheusHooks({ registry }), {
        onStoreError: (event) => void storeErrors.push(event.operation),
      }),
    });
    let runs = 0;
    const error = await tx
      .runInTransaction({ key: `giveup-${randomUUID()}` }, async (t) => {
        runs++;
        await t.query(
          "DO $$ BEGIN RAISE EXCEPTION 'forced' USING ERRCODE = 'serialization_failure'; END $$",
        );
      })
      .catch((e: unknown) => e);
    expect(isStoreUnavailableError(error)).toBe(true);
    expect(runs).toBe(3);
    expect(storeErrors).toEqual(['transaction handler']);
    expect(await registry.metrics()).toContain(
      'idempotency_store_errors_total{namespace="default",operation="transaction handler"} 1',
    );
  });
});
