/**
 * The fake payment provider. Like a real one (Stripe's `Idempotency-Key`, Adyen's, …) it deduplicates on
 * the caller's idempotency key: the first request with a key creates a charge, every later request with
 * the same key gets that same charge back and is only counted. Sending the same key with a different
 * amount or currency is refused.
 *
 * Its ledger lives in the example's database (`provider_charges`, unique on the key) but is written in its
 * own statement, never inside the worker's transaction: it stands for a separate system, and it has to
 * survive the chaos test's `kill -9`s so the test can count charges at the end.
 * @module
 */
import { randomUUID } from 'node:crypto';

/** A charge as the provider's ledger keeps it. */
export interface ProviderCharge {
  /** The provider's id for the charge (`ch_…`). */
  chargeId: string;
  /** The caller's idempotency key (the worker's `downstreamKey('charge')`). */
  idempotencyKey: string;
  /** The payment it pays for. */
  paymentId: string;
  /** Amount in minor units. */
  amount: number;
  /** Currency code. */
  currency: string;
  /** How many requests carried this key (1 = never retried). */
  requests: number;
}

/** The ledger's storage: one atomic upsert on the idempotency key. */
export interface ChargeLedger {
  /**
   * Insert `charge` unless its key exists; otherwise count one more request. Resolves to the stored row
   * (the first one's charge id and amounts).
   */
  upsert(charge: Omit<ProviderCharge, 'requests'>): Promise<ProviderCharge>;
}

/** What the worker asks the provider for. */
export interface ChargeRequest {
  /** Sent as the provider's `Idempotency-Key`: stable across every retry of this payment's charge. */
  idempotencyKey: string;
  /** The payment. */
  paymentId: string;
  /** Amount in minor units. */
  amount: number;
  /** Currency code. */
  currency: string;
}

/** Options of {@link createFakeProvider}. */
export interface FakeProviderOptions {
  /** Where charges are kept. */
  ledger: ChargeLedger;
  /** Simulated network latency before and after the ledger write, in ms (widens the crash windows). @default 10 */
  latencyMs?: number;
}

/** The fake provider's API. */
export interface FakeProvider {
  /**
   * Charge once per idempotency key: a repeat returns the first charge.
   * @throws Error when the key was used for a different amount or currency.
   */
  charge(request: ChargeRequest): Promise<ProviderCharge>;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * Create the fake provider over a ledger.
 * @example
 * const provider = createFakeProvider({ ledger: database.ledger });
 * const charge = await provider.charge({ idempotencyKey: ctx.downstreamKey('charge'), paymentId, amount, currency });
 */
export function createFakeProvider(options: FakeProviderOptions): FakeProvider {
  const latencyMs = options.latencyMs ?? 10;
  return {
    async charge(request) {
      await sleep(Math.random() * latencyMs);
      const stored = await options.ledger.upsert({
        chargeId: `ch_${randomUUID()}`,
        idempotencyKey: request.idempotencyKey,
        paymentId: request.paymentId,
        amount: request.amount,
        currency: request.currency,
      });
      if (
        stored.paymentId !== request.paymentId ||
        stored.amount !== request.amount ||
        stored.currency !== request.currency
      ) {
        throw new Error(
          `provider: idempotency key ${request.idempotencyKey} was first used for another charge`,
        );
      }
      // The answer may be lost on the way back (a crash right here): the retry gets the same charge.
      await sleep(Math.random() * latencyMs);
      return stored;
    },
  };
}
