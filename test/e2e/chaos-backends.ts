/**
 * The three deployments the chaos test runs, each with names unique to the run and a cleanup:
 * PostgreSQL + RabbitMQ and PostgreSQL + NATS (API, relay and worker as separate processes), and the
 * embedded default (SQLite + in-process bus: one process, since the bus cannot cross processes).
 * @module
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect as natsConnect } from '@nats-io/transport-node';
import { connect as amqpConnect } from 'amqplib';
import Database from 'better-sqlite3';
import pg from 'pg';
import { env } from '../helpers/env.js';

/** One payment and its provider charges, as the pass condition reads them. */
export interface LedgerView {
  /** Every payment row. */
  payments: Array<{ id: string; status: string; chargeId: string | null }>;
  /** Every provider charge. */
  charges: Array<{ paymentId: string; chargeId: string; requests: number }>;
}

/** A deployment under test. */
export interface ChaosBackend {
  /** Label for messages. */
  name: string;
  /** The roles to run as separate processes. */
  roles: string[];
  /** Environment of every process. */
  env: Record<string, string>;
  /** Read the payments and the provider's ledger. */
  inspect(): Promise<LedgerView>;
  /** Delete everything the run created. */
  cleanup(): Promise<void>;
}

/** Timings that make recovery after a SIGKILL quick (the example's defaults are 10 s). */
const FAST_RECOVERY = {
  RELAY_LEASE_MS: '3000',
  WORKER_LEASE_MS: '2000',
  ACK_WAIT_MS: '2000',
  POLL_INTERVAL_MS: '250',
};

const runId = () => randomBytes(4).toString('hex');

async function inspectPostgres(pool: pg.Pool, schema: string): Promise<LedgerView> {
  const payments = await pool.query<{ id: string; status: string; charge_id: string | null }>(
    `SELECT id, status, charge_id FROM ${schema}.payments`,
  );
  const charges = await pool.query<{ payment_id: string; charge_id: string; requests: number }>(
    `SELECT payment_id, charge_id, requests FROM ${schema}.provider_charges`,
  );
  return {
    payments: payments.rows.map((r) => ({ id: r.id, status: r.status, chargeId: r.charge_id })),
    charges: charges.rows.map((r) => ({
      paymentId: r.payment_id,
      chargeId: r.charge_id,
      requests: r.requests,
    })),
  };
}

async function postgresBackend(broker: 'amqp' | 'nats', port: number): Promise<ChaosBackend> {
  const id = runId();
  const schema = `ik_e2e_${id}`;
  const prefix = `ik-e2e-${id}`;
  const pool = new pg.Pool({ connectionString: env.databaseUrl, max: 2 });
  pool.on('error', () => {});
  const brokerEnv: Record<string, string> =
    broker === 'amqp' ? { AMQP_URL: env.amqpUrl } : { NATS_URL: env.natsUrl };
  return {
    name: `PostgreSQL + ${broker === 'amqp' ? 'RabbitMQ' : 'NATS'}`,
    roles: ['api', 'relay', 'worker'],
    env: {
      ...FAST_RECOVERY,
      ...brokerEnv,
      DATABASE_URL: env.databaseUrl,
      PAYMENTS_SCHEMA: schema,
      BROKER_PREFIX: prefix,
      PORT: String(port),
    },
    inspect: async () => {
      const exists = await pool.query(
        'SELECT 1 FROM pg_tables WHERE schemaname = $1 AND tablename = $2',
        [schema, 'provider_charges'],
      );
      return exists.rowCount === 0 ? { payments: [], charges: [] } : inspectPostgres(pool, schema);
    },
    cleanup: async () => {
      await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      await pool.end();
      if (broker === 'amqp') {
        const connection = await amqpConnect(env.amqpUrl);
        const channel = await connection.createChannel();
        for (const suffix of ['', '.retry', '.dlq']) {
          await channel.deleteQueue(`${prefix}.payment.initiated${suffix}`);
        }
        await connection.close();
      } else {
        const nc = await natsConnect({ servers: env.natsUrl });
        const jsm = await jetstreamManager(nc);
        await jsm.streams
          .delete(prefix.replace(/[^A-Za-z0-9_-]/g, '_').toUpperCase())
          .catch(() => false);
        await nc.close();
      }
    },
  };
}

/** PostgreSQL + RabbitMQ, three processes. */
export const postgresAmqp = (port: number) => postgresBackend('amqp', port);

/** PostgreSQL + NATS JetStream, three processes. */
export const postgresNats = (port: number) => postgresBackend('nats', port);

/** The embedded default: SQLite file + in-process bus, one process (`ROLE=all`). */
export async function embedded(port: number): Promise<ChaosBackend> {
  const dir = mkdtempSync(join(tmpdir(), 'ik-e2e-'));
  const file = join(dir, 'payments.db');
  return {
    name: 'SQLite + in-process bus',
    roles: ['all'],
    env: { ...FAST_RECOVERY, SQLITE_FILE: file, PORT: String(port) },
    inspect: async () => {
      if (!existsSync(file)) return { payments: [], charges: [] };
      const db = new Database(file, { readonly: true, fileMustExist: true });
      try {
        db.pragma('busy_timeout = 5000');
        const hasTables = db
          .prepare(
            "SELECT count(*) AS n FROM sqlite_master WHERE name IN ('payments', 'provider_charges')",
          )
          .get() as { n: number };
        if (hasTables.n < 2) return { payments: [], charges: [] };
        const payments = db.prepare('SELECT id, status, charge_id FROM payments').all() as Array<{
          id: string;
          status: string;
          charge_id: string | null;
        }>;
        const charges = db
          .prepare('SELECT payment_id, charge_id, requests FROM provider_charges')
          .all() as Array<{ payment_id: string; charge_id: string; requests: number }>;
        return {
          payments: payments.map((r) => ({ id: r.id, status: r.status, chargeId: r.charge_id })),
          charges: charges.map((r) => ({
            paymentId: r.payment_id,
            chargeId: r.charge_id,
            requests: r.requests,
          })),
        };
      } finally {
        db.close();
      }
    },
    cleanup: async () => rmSync(dir, { recursive: true, force: true }),
  };
}
