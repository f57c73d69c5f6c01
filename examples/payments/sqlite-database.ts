/**
 * The embedded default: everything in one SQLite file (WAL). The API's transaction runs on the same
 * connection as the relay's source, so `enqueue` wakes the relay at once; the worker's records use the
 * same records table as the API, under the worker's own scope.
 * @module
 */
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import { enqueue, migrateOutbox, sqliteOutboxSource } from '../../src/outbox/index.js';
import { sqliteStore, sqliteTransactional } from '../../src/sqlite/index.js';
import { NAMESPACE } from './config.js';
import {
  initiatedMessage,
  type PaymentRow,
  type SqlitePaymentsDatabase,
  toPayment,
} from './database.js';
import { newPayment, PaymentStatus } from './payment.js';
import type { ProviderCharge } from './provider.js';

const SCHEMA = `
CREATE TABLE IF NOT EXISTS payments (
  id TEXT PRIMARY KEY,
  amount INTEGER NOT NULL,
  currency TEXT NOT NULL,
  customer TEXT NOT NULL,
  status TEXT NOT NULL,
  charge_id TEXT,
  created_at TEXT NOT NULL,
  captured_at TEXT
);
CREATE TABLE IF NOT EXISTS provider_charges (
  idempotency_key TEXT PRIMARY KEY,
  charge_id TEXT NOT NULL UNIQUE,
  payment_id TEXT NOT NULL,
  amount INTEGER NOT NULL,
  currency TEXT NOT NULL,
  requests INTEGER NOT NULL DEFAULT 1
);`;

/**
 * Open (and create) the example's SQLite file.
 * @example
 * const database = openSqliteDatabase('.data/payments.db');
 */
export function openSqliteDatabase(file: string): SqlitePaymentsDatabase {
  mkdirSync(dirname(file), { recursive: true });
  const db = new Database(file);
  // WAL: readers never block the writer. NORMAL loses nothing on a process crash (kill -9), only
  // possibly the last commits on a power loss. The busy timeout matters only with several processes.
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.pragma('busy_timeout = 5000');
  db.transaction(() => db.exec(SCHEMA)).immediate();
  migrateOutbox(db);
  const transactional = sqliteTransactional({ database: db, namespace: NAMESPACE });

  const insertPayment = db.prepare(
    `INSERT INTO payments (id, amount, currency, customer, status, created_at)
     VALUES (@id, @amount, @currency, @customer, @status, @createdAt)`,
  );
  const selectPayment = db.prepare('SELECT * FROM payments WHERE id = ?');
  const capture = db.prepare(
    `UPDATE payments SET status = @captured, charge_id = @chargeId, captured_at = @now
     WHERE id = @id AND status <> @captured`,
  );
  // One statement: insert, or count a repeat of the same key; RETURNING gives the stored row either way.
  const upsertCharge = db.prepare(
    `INSERT INTO provider_charges (idempotency_key, charge_id, payment_id, amount, currency)
     VALUES (@idempotencyKey, @chargeId, @paymentId, @amount, @currency)
     ON CONFLICT (idempotency_key) DO UPDATE SET requests = requests + 1
     RETURNING idempotency_key, charge_id, payment_id, amount, currency, requests`,
  );

  return {
    kind: 'sqlite',
    transactional,
    writePayment(tx, input) {
      // Synchronous, inside BEGIN IMMEDIATE on `db`: the record, this row and the outbox row commit together.
      const payment = newPayment(input);
      insertPayment.run(payment);
      enqueue(tx.database, initiatedMessage(payment, tx));
      return payment;
    },
    async getPayment(id) {
      const row = selectPayment.get(id) as PaymentRow | undefined;
      return row === undefined ? undefined : toPayment(row);
    },
    async markCaptured(id, chargeId) {
      capture.run({
        captured: PaymentStatus.Captured,
        chargeId,
        now: new Date().toISOString(),
        id,
      });
      return selectPayment.get(id) !== undefined;
    },
    ledger: {
      async upsert(charge) {
        const row = upsertCharge.get(charge) as {
          idempotency_key: string;
          charge_id: string;
          payment_id: string;
          amount: number;
          currency: string;
          requests: number;
        };
        const stored: ProviderCharge = {
          idempotencyKey: row.idempotency_key,
          chargeId: row.charge_id,
          paymentId: row.payment_id,
          amount: row.amount,
          currency: row.currency,
          requests: row.requests,
        };
        return stored;
      },
    },
    outboxSource: () => sqliteOutboxSource({ database: db }),
    recordStore: () => sqliteStore({ database: db }),
    async close() {
      db.close();
    },
  };
}
