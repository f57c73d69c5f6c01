/**
 * PostgreSQL: the payments, the outbox, the API's records and the provider's ledger in one schema. The
 * API's transaction goes through the transactional mode's `tx`; the relay claims with SKIP LOCKED and is
 * woken by LISTEN/NOTIFY; any number of API, relay and worker processes can share the schema.
 * @module
 */
import pg from 'pg';
import { enqueue, migrateOutbox, postgresOutboxSource } from '../../src/outbox/index.js';
import { migrate, postgresStore, postgresTransactional } from '../../src/postgres/index.js';
import { NAMESPACE } from './config.js';
import {
  initiatedMessage,
  type PaymentRow,
  type PostgresPaymentsDatabase,
  toPayment,
} from './database.js';
import { newPayment, PaymentStatus } from './payment.js';

const tables = (schema: string) => `
CREATE TABLE IF NOT EXISTS ${schema}.payments (
  id text PRIMARY KEY,
  amount bigint NOT NULL,
  currency text NOT NULL,
  customer text NOT NULL,
  status text NOT NULL,
  charge_id text,
  created_at timestamptz NOT NULL,
  captured_at timestamptz
);
CREATE TABLE IF NOT EXISTS ${schema}.provider_charges (
  idempotency_key text PRIMARY KEY,
  charge_id text NOT NULL UNIQUE,
  payment_id text NOT NULL,
  amount bigint NOT NULL,
  currency text NOT NULL,
  requests integer NOT NULL DEFAULT 1
);`;

/** Options of {@link openPostgresDatabase}. */
export interface PostgresDatabaseOptions {
  /** Connection string. */
  url: string;
  /** Schema of every table; created if missing. */
  schema: string;
  /** Pool size. @default 10 */
  max?: number;
}

/**
 * Connect, and create the schema and tables if needed (safe from several processes at once).
 * @example
 * const database = await openPostgresDatabase({ url: process.env.DATABASE_URL, schema: 'payments' });
 */
export async function openPostgresDatabase(
  options: PostgresDatabaseOptions,
): Promise<PostgresPaymentsDatabase> {
  const { schema } = options;
  if (!/^[a-z_][a-z0-9_]{0,62}$/.test(schema)) {
    throw new Error(`PAYMENTS_SCHEMA must be a lower-case SQL identifier, got ${schema}`);
  }
  const pool = new pg.Pool({ connectionString: options.url, max: options.max ?? 10 });
  // An idle connection that dies emits 'error'; without a listener that would crash the process.
  pool.on('error', (error) => console.error(`idle PostgreSQL connection failed: ${error.message}`));

  await migrate(pool, { schema });
  await migrateOutbox(pool, { schema });
  const client = await pool.connect();
  try {
    // CREATE TABLE IF NOT EXISTS races with itself across processes: serialise on an advisory lock.
    await client.query('BEGIN');
    await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`${schema}.payments`]);
    await client.query(tables(schema));
    await client.query('COMMIT');
  } catch (error) {
    await client.query('ROLLBACK').catch(() => {});
    throw error;
  } finally {
    client.release();
  }

  const transactional = postgresTransactional({ pool, schema, namespace: NAMESPACE });
  return {
    kind: 'postgres',
    transactional,
    async writePayment(tx, input) {
      const payment = newPayment(input);
      await tx.query(
        `INSERT INTO ${schema}.payments (id, amount, currency, customer, status, created_at)
         VALUES ($1, $2, $3, $4, $5, $6)`,
        [
          payment.id,
          payment.amount,
          payment.currency,
          payment.customer,
          payment.status,
          payment.createdAt,
        ],
      );
      // Same transaction: the message exists if and only if the payment and the record do.
      await enqueue(tx, initiatedMessage(payment, tx), { schema, verifyTransaction: false });
      return payment;
    },
    async getPayment(id) {
      const { rows } = await pool.query<PaymentRow>(
        `SELECT * FROM ${schema}.payments WHERE id = $1`,
        [id],
      );
      return rows[0] === undefined ? undefined : toPayment(rows[0]);
    },
    async markCaptured(id, chargeId) {
      const { rowCount } = await pool.query(
        `UPDATE ${schema}.payments
            SET status = $1, charge_id = COALESCE(charge_id, $2), captured_at = COALESCE(captured_at, now())
          WHERE id = $3`,
        [PaymentStatus.Captured, chargeId, id],
      );
      return (rowCount ?? 0) > 0;
    },
    ledger: {
      async upsert(charge) {
        // One statement: insert, or count a repeat of the same key; RETURNING gives the stored row.
        const { rows } = await pool.query<{
          idempotency_key: string;
          charge_id: string;
          payment_id: string;
          amount: string;
          currency: string;
          requests: number;
        }>(
          `INSERT INTO ${schema}.provider_charges AS c
                  (idempotency_key, charge_id, payment_id, amount, currency)
           VALUES ($1, $2, $3, $4, $5)
           ON CONFLICT (idempotency_key) DO UPDATE SET requests = c.requests + 1
           RETURNING idempotency_key, charge_id, payment_id, amount, currency, requests`,
          [
            charge.idempotencyKey,
            charge.chargeId,
            charge.paymentId,
            charge.amount,
            charge.currency,
          ],
        );
        const row = rows[0];
        if (row === undefined) throw new Error('provider ledger: upsert returned no row');
        return {
          idempotencyKey: row.idempotency_key,
          chargeId: row.charge_id,
          paymentId: row.payment_id,
          amount: Number(row.amount),
          currency: row.currency,
          requests: row.requests,
        };
      },
    },
    outboxSource: () => postgresOutboxSource({ pool, schema }),
    recordStore: () => postgresStore({ pool, schema }),
    close: () => pool.end(),
  };
}
