/**
 * PostgreSQL example: the store behind the engine, and the transactional mode in which the idempotency
 * record commits in the same transaction as the order it protects.
 *
 * Run: `npx tsx examples/postgres-store.ts` (DATABASE_URL, default postgres://postgres@127.0.0.1:5432/test;
 * EXAMPLE_SCHEMA, default idempotency_example).
 * In your code, import from `idempotency-kit` and `idempotency-kit/postgres`.
 * @module
 */
import pg from 'pg';
import { createIdempotency } from '../src/index.js';
import { migrate, postgresStore, postgresTransactional } from '../src/postgres/index.js';

const pool = new pg.Pool({
  connectionString: process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test',
  max: 10,
});
// node-postgres emits 'error' when an idle connection dies; without a listener that crashes the process.
pool.on('error', (error) => console.error('idle PostgreSQL connection failed:', error.message));

const schema = process.env.EXAMPLE_SCHEMA ?? 'idempotency_example';

async function main(): Promise<void> {
  // Once per deployment (or `npx idempotency-kit migrate --database-url … --schema …`).
  await migrate(pool, { schema });
  await pool.query(
    `CREATE TABLE IF NOT EXISTS ${schema}.orders (id serial PRIMARY KEY, customer text NOT NULL, total int NOT NULL)`,
  );

  // 1. The store behind the engine: a side effect outside the database (an email, a payment API call).
  const idempotency = createIdempotency({
    store: postgresStore({ pool, schema }),
    namespace: 'shop',
  });
  const key = `welcome-mail-${Date.now()}`;
  for (let delivery = 1; delivery <= 2; delivery++) {
    const outcome = await idempotency.run(
      { key, payload: { to: 'ada@example.com' } },
      async (ctx) => {
        // Hand the derived key to the mail provider so it deduplicates too, should this run again.
        return { sent: true, providerKey: ctx.downstreamKey('mail') };
      },
    );
    console.log(`delivery ${delivery}: ${outcome.status}`);
  }

  // 2. Transactional mode: the order row and the idempotency record commit together or not at all.
  const transactional = postgresTransactional({ pool, schema, namespace: 'shop' });
  const order = { customer: 'ada', total: 4200 };
  const orderKey = `order-${Date.now()}`;
  for (let attempt = 1; attempt <= 2; attempt++) {
    const outcome = await transactional.runInTransaction(
      { key: orderKey, scope: 'tenant-42', payload: order },
      async (tx) => {
        const { rows } = await tx.query<{ id: number }>(
          `INSERT INTO ${schema}.orders (customer, total) VALUES ($1, $2) RETURNING id`,
          [order.customer, order.total],
        );
        return { orderId: rows[0]!.id };
      },
    );
    switch (outcome.status) {
      case 'executed':
      case 'replayed':
        console.log(`order attempt ${attempt}: ${outcome.status}, order ${outcome.value.orderId}`);
        break;
      case 'in_progress':
        console.log(`order attempt ${attempt}: still running, retry in ${outcome.retryAfterMs} ms`);
        break;
      case 'mismatch':
        console.log(`order attempt ${attempt}: key reused with another payload`);
        break;
    }
  }

  // Housekeeping, usually a cron job or `npx idempotency-kit purge`.
  const purged = await postgresStore({ pool, schema }).purgeExpired({ limit: 1000 });
  console.log(`purged ${purged} expired records`);
}

main()
  .catch((error) => {
    console.error(error);
    process.exitCode = 1;
  })
  .finally(() => pool.end());
