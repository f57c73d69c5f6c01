/**
 * Two PostgreSQL stores in one process (two schemas: an orders API and a payments consumer, say), timed on
 * one registry: both are `postgres` by default, and their calls used to add up under that one label with
 * nothing said. The second now draws a process warning naming the `label` option.
 */
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { postgresStore } from '../../../src/postgres/index.js';
import { withStoreMetrics } from '../../../src/prometheus/index.js';
import { type PostgresFixture, setupPostgres } from '../../helpers/postgres-env.js';

describe('withStoreMetrics with two PostgreSQL stores on one registry', () => {
  let orders: PostgresFixture;
  let payments: PostgresFixture;

  beforeAll(async () => {
    orders = await setupPostgres('metrics_orders');
    payments = await setupPostgres('metrics_payments');
  });

  afterAll(async () => {
    await orders?.dispose();
    await payments?.dispose();
  });

  it('warns of the second store under the default label, and times each under its own label', async () => {
    // Arrange
    const registry = new Registry();
    const ordersStore = postgresStore({ pool: orders.pool, schema: orders.schema });
    const paymentsStore = postgresStore({ pool: payments.pool, schema: payments.schema });
    const warnings: Array<Error & { code?: string }> = [];
    const listener = (warning: Error & { code?: string }) => warnings.push(warning);
    process.on('warning', listener);
    withStoreMetrics(ordersStore, { registry });

    // Act
    withStoreMetrics(paymentsStore, { registry });
    await new Promise((resolve) => setImmediate(resolve));
    process.off('warning', listener);

    // Assert: said, naming the label and the option that fixes it.
    expect(warnings.map(({ code }) => code)).toEqual(['IDEMPOTENCY_KIT_SHARED_STORE_LABEL']);
    expect(warnings[0]?.message).toContain(
      "another store under the label 'postgres' in this registry: their calls add up in one series. Pass a distinct `label` option",
    );

    // Arrange: each store under its own label, as the message says.
    const labelled = new Registry();
    const timedOrders = withStoreMetrics(ordersStore, { registry: labelled, label: 'orders' });
    const timedPayments = withStoreMetrics(paymentsStore, {
      registry: labelled,
      label: 'payments',
    });
    // Act
    await timedOrders.get('k');
    await timedPayments.get('k');
    await timedPayments.get('k');
    // Assert: each store's calls under its own label.
    const text = await labelled.metrics();
    const gets = (store: string) =>
      text
        .split('\n')
        .find((line) =>
          line.startsWith(
            `idempotency_store_call_seconds_count{store="${store}",operation="get",result="ok"} `,
          ),
        )
        ?.split(' ')[1];
    expect({ orders: gets('orders'), payments: gets('payments') }).toEqual({
      orders: '1',
      payments: '2',
    });
  });
});
