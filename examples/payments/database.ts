/**
 * What the example needs from its database, whichever it is (SQLite file or PostgreSQL): the transactional
 * mode POST /v1/payments runs in and the payment write it makes inside that transaction, the payment reads
 * and updates, the provider's ledger, the outbox source for the relay and the store for the worker's
 * idempotency records.
 * @module
 */

import type { Store } from '../../src/index.js';
import type { EnqueueMessage, OutboxSource } from '../../src/outbox/index.js';
import type { PostgresTransactional, TransactionContext } from '../../src/postgres/index.js';
import type { SqliteTransactional, SqliteTransactionContext } from '../../src/sqlite/index.js';
import { PAYMENT_INITIATED } from './config.js';
import { initiatedEvent, type Payment, type PaymentInput } from './payment.js';
import type { ChargeLedger } from './provider.js';

/** What both backends offer besides the POST transaction. */
interface PaymentsDatabaseBase {
  /** One payment, or `undefined`. */
  getPayment(id: string): Promise<Payment | undefined>;
  /** Set `captured` with the provider's charge id; idempotent. Resolves to whether the payment exists. */
  markCaptured(id: string, chargeId: string): Promise<boolean>;
  /** The fake provider's ledger. */
  readonly ledger: ChargeLedger;
  /** The outbox as a relay source. */
  outboxSource(): OutboxSource;
  /** A store for the worker's idempotency records (same tables as the API's, other scope). */
  recordStore(): Store;
  /** Close the connections. */
  close(): Promise<void>;
}

/** The SQLite file: its transactional mode runs synchronous handlers only. */
export interface SqlitePaymentsDatabase extends PaymentsDatabaseBase {
  /** Which backend. */
  readonly kind: 'sqlite';
  /** The transactional mode POST /v1/payments claims its keys in. */
  readonly transactional: SqliteTransactional;
  /**
   * Inside `transactional`'s open transaction, synchronously (better-sqlite3 cannot keep a transaction
   * across an `await`): insert a new payment for `input` and enqueue its `payment.initiated`.
   */
  writePayment(tx: SqliteTransactionContext, input: PaymentInput): Payment;
}

/** PostgreSQL: its transactional mode runs asynchronous handlers on the transaction's connection. */
export interface PostgresPaymentsDatabase extends PaymentsDatabaseBase {
  /** Which backend. */
  readonly kind: 'postgres';
  /** The transactional mode POST /v1/payments claims its keys in. */
  readonly transactional: PostgresTransactional;
  /**
   * Inside `transactional`'s open transaction, through `tx`: insert a new payment for `input` and enqueue
   * its `payment.initiated`.
   */
  writePayment(tx: TransactionContext, input: PaymentInput): Promise<Payment>;
}

/**
 * The example's database. A union rather than one interface: each backend's transaction context, and
 * whether the write in it may `await`, differ, and `kind` tells the route which it has.
 */
export type PaymentsDatabase = SqlitePaymentsDatabase | PostgresPaymentsDatabase;

/**
 * The outbox message announcing `payment`. Its id is `tx.downstreamKey('payment.initiated')`: derived from
 * the request's key, so every retry of the request would enqueue it under the same id, and a re-send is
 * recognised downstream.
 */
export function initiatedMessage(
  payment: Payment,
  tx: { downstreamKey(step: string): string },
): EnqueueMessage {
  return {
    topic: PAYMENT_INITIATED,
    key: payment.id,
    payload: initiatedEvent(payment),
    messageId: tx.downstreamKey(PAYMENT_INITIATED),
  };
}

/** Columns of a payment row, as both backends return them. */
export interface PaymentRow {
  id: string;
  amount: number | string;
  currency: string;
  customer: string;
  status: string;
  charge_id: string | null;
  created_at: string | Date;
  captured_at: string | Date | null;
}

const iso = (value: string | Date | null): string | null =>
  value === null ? null : value instanceof Date ? value.toISOString() : value;

/** A row as a {@link Payment}. */
export function toPayment(row: PaymentRow): Payment {
  return {
    id: row.id,
    amount: Number(row.amount),
    currency: row.currency,
    customer: row.customer,
    status: row.status as Payment['status'],
    chargeId: row.charge_id,
    createdAt: iso(row.created_at) ?? '',
    capturedAt: iso(row.captured_at),
  };
}
