/**
 * What the example needs from its database, whichever it is (SQLite file or PostgreSQL): the payment
 * writes, the one transaction of POST /v1/payments, the provider's ledger, the outbox source for the relay
 * and the store for the worker's idempotency records.
 * @module
 */

import type { HttpOutcome } from '../../src/http/index.js';
import type { RunOutcome, Store } from '../../src/index.js';
import type { OutboxSource } from '../../src/outbox/index.js';
import type { KeyedRequest } from './http-idempotency.js';
import type { Payment, PaymentInput } from './payment.js';
import type { ChargeLedger } from './provider.js';

/** The example's database. */
export interface PaymentsDatabase {
  /** Which backend. */
  readonly kind: 'sqlite' | 'postgres';
  /**
   * In ONE transaction: claim the request's key, insert a new payment, enqueue `payment.initiated` with
   * the message id `downstreamKey('payment.initiated')`, and store `respond(payment)` as the key's outcome.
   * A retry of the same request replays that outcome and writes nothing.
   */
  createPayment(
    request: KeyedRequest,
    input: PaymentInput,
    respond: (payment: Payment) => HttpOutcome,
  ): Promise<RunOutcome<HttpOutcome>>;
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
