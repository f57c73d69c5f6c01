/**
 * The payment: what a client sends, what the API stores and answers, what the worker receives, and the
 * validation of a request body (done before any claim, so a bad body stores nothing).
 * @module
 */
import { randomUUID } from 'node:crypto';

/** Payment statuses, as stored. */
export const PaymentStatus = {
  /** Written by the API; `payment.initiated` is in the outbox. */
  Initiated: 'initiated',
  /** The worker charged the provider and recorded the charge. */
  Captured: 'captured',
} as const;

/** One of the {@link PaymentStatus} values. */
export type PaymentStatus = (typeof PaymentStatus)[keyof typeof PaymentStatus];

/** What a client posts to /v1/payments. */
export interface PaymentInput {
  /** In minor units (cents): a positive integer. */
  amount: number;
  /** ISO 4217 code, upper case (`EUR`). */
  currency: string;
  /** The customer's id. */
  customer: string;
}

/** A payment as stored and returned. */
export interface Payment extends PaymentInput {
  /** `pay_` + a UUID, chosen by the API. */
  id: string;
  /** Where it is in its life. */
  status: PaymentStatus;
  /** The provider's charge id, once captured. */
  chargeId: string | null;
  /** When the API wrote it (ISO 8601). */
  createdAt: string;
  /** When the worker captured it (ISO 8601). */
  capturedAt: string | null;
}

/** The body of a `payment.initiated` message. */
export interface PaymentInitiated {
  /** The payment to charge. */
  paymentId: string;
  /** Amount in minor units. */
  amount: number;
  /** Currency code. */
  currency: string;
}

/** One reason a body was refused. */
export interface FieldError {
  /** The field (or `body`). */
  field: string;
  /** What is wrong with it. */
  message: string;
}

const MAX_AMOUNT = 100_000_000;
const FIELDS = new Set(['amount', 'currency', 'customer']);

/**
 * Validate a parsed JSON body.
 * @returns the input, or every problem found (never both).
 */
export function parsePaymentInput(
  body: unknown,
): { ok: true; input: PaymentInput } | { ok: false; errors: FieldError[] } {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    return {
      ok: false,
      errors: [{ field: 'body', message: 'must be a JSON object { amount, currency, customer }' }],
    };
  }
  const record = body as Record<string, unknown>;
  const errors: FieldError[] = [];
  const { amount, currency, customer } = record;
  if (
    typeof amount !== 'number' ||
    !Number.isSafeInteger(amount) ||
    amount < 1 ||
    amount > MAX_AMOUNT
  ) {
    errors.push({
      field: 'amount',
      message: `must be an integer from 1 to ${MAX_AMOUNT} (minor units)`,
    });
  }
  if (typeof currency !== 'string' || !/^[A-Z]{3}$/.test(currency)) {
    errors.push({ field: 'currency', message: 'must be a three-letter ISO 4217 code, e.g. "EUR"' });
  }
  if (typeof customer !== 'string' || !/^[A-Za-z0-9_-]{1,64}$/.test(customer)) {
    errors.push({ field: 'customer', message: 'must be 1-64 letters, digits, "_" or "-"' });
  }
  for (const name of Object.keys(record)) {
    if (!FIELDS.has(name)) errors.push({ field: name, message: 'is not a known field' });
  }
  if (errors.length > 0) return { ok: false, errors };
  return {
    ok: true,
    input: { amount: amount as number, currency: currency as string, customer: customer as string },
  };
}

/** A new payment for `input`, not yet stored. */
export function newPayment(input: PaymentInput, now = new Date()): Payment {
  return {
    id: `pay_${randomUUID()}`,
    amount: input.amount,
    currency: input.currency,
    customer: input.customer,
    status: PaymentStatus.Initiated,
    chargeId: null,
    createdAt: now.toISOString(),
    capturedAt: null,
  };
}

/** The message the API enqueues for `payment`. */
export function initiatedEvent(payment: Payment): PaymentInitiated {
  return { paymentId: payment.id, amount: payment.amount, currency: payment.currency };
}

/**
 * Read a `payment.initiated` body.
 * @throws Error when it is not one (the consumer retries, then dead-letters it).
 */
export function parseInitiated(value: unknown): PaymentInitiated {
  const event = value as Partial<PaymentInitiated> | null;
  if (
    typeof event?.paymentId !== 'string' ||
    typeof event.amount !== 'number' ||
    typeof event.currency !== 'string'
  ) {
    throw new Error(`not a payment.initiated body: ${JSON.stringify(value)}`);
  }
  return { paymentId: event.paymentId, amount: event.amount, currency: event.currency };
}
