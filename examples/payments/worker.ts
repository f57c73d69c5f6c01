/**
 * The worker's handler: charge the provider with the key derived from this message's claim, then mark the
 * payment captured. It runs under an idempotent consumer (scope `consumer:payments-worker`), so a duplicate
 * message is acknowledged without running it. If the worker dies between the charge and the capture, the
 * message comes back, the next attempt takes the claim over, charges again with the **same** derived key,
 * and the provider answers with the first charge: one charge, whatever happens.
 * @module
 */
import type { PaymentsDatabase } from './database.js';
import type { PaymentInitiated } from './payment.js';
import type { FakeProvider } from './provider.js';

/** The part of a consumer's context the handler uses (every consumer of this package provides it). */
export interface WorkerContext {
  /** A key stable across every attempt at this message: pass it to the provider. */
  downstreamKey(step: string): string;
}

/** The handler every broker's consumer calls. */
export type PaymentHandler = (event: PaymentInitiated, context: WorkerContext) => Promise<void>;

/** Options of {@link createPaymentHandler}. */
export interface PaymentHandlerOptions {
  /** Where the payment is marked captured. */
  database: PaymentsDatabase;
  /** Who is charged. */
  provider: FakeProvider;
  /** Called after each capture. @default nothing */
  onCaptured?: (paymentId: string, chargeId: string, providerRequests: number) => void;
}

/**
 * Build the handler.
 * @example
 * const handle = createPaymentHandler({ database, provider });
 * await handle({ paymentId, amount, currency }, ctx);
 */
export function createPaymentHandler(options: PaymentHandlerOptions): PaymentHandler {
  const { database, provider } = options;
  return async (event, context) => {
    const charge = await provider.charge({
      idempotencyKey: context.downstreamKey('charge'),
      paymentId: event.paymentId,
      amount: event.amount,
      currency: event.currency,
    });
    // Idempotent: a second capture of a captured payment changes nothing.
    if (!(await database.markCaptured(event.paymentId, charge.chargeId))) {
      throw new Error(`payment ${event.paymentId} does not exist`);
    }
    options.onCaptured?.(event.paymentId, charge.chargeId, charge.requests);
  };
}
