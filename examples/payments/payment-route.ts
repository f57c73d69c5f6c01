/**
 * The transaction of POST /v1/payments, on `transactionalRoute` (`idempotency-kit/express`): the key's
 * claim, the payment row, the `payment.initiated` outbox row and the stored 201 commit together in the
 * database's transactional mode, or not at all. The route gives the layer's answers: the replay
 * (`Idempotent-Replayed: true`), 400 `missing_key` / `invalid_key`, 409 `in_progress`, 422
 * `key_mismatch`, 503 `store_unavailable`.
 * @module
 */
import type { Request } from 'express';
import {
  type TransactionalAnswer,
  type TransactionalRouteHandler,
  transactionalRoute,
} from '../../src/express/index.js';
import type { PaymentsDatabase } from './database.js';
import type { Payment, PaymentInput } from './payment.js';

/** The answer stored with the key and replayed byte for byte: the payment, and where to read it. */
function created(payment: Payment): TransactionalAnswer {
  return { status: 201, body: payment, headers: { location: `/v1/payments/${payment.id}` } };
}

// Checked before the route (`validPayment` in api.ts): a bad body must be refused before the key is
// claimed, so that nothing is stored and the corrected request may reuse the key.
const inputOf = (req: Request) => req.body as PaymentInput;

/**
 * The route that creates a payment once per `Idempotency-Key`. Mount it after the JSON body parser and
 * the body's validation (the body is part of the request's fingerprint).
 * @example
 * const route = paymentRoute(database);
 * app.post('/v1/payments', route.requireKey, express.json(), validPayment, route);
 */
export function paymentRoute(database: PaymentsDatabase): TransactionalRouteHandler {
  if (database.kind === 'sqlite') {
    // Synchronous: better-sqlite3 cannot keep the transaction open across an `await`.
    return transactionalRoute(database.transactional, (req, tx) =>
      created(database.writePayment(tx, inputOf(req))),
    );
  }
  return transactionalRoute(database.transactional, async (req, tx) =>
    created(await database.writePayment(tx, inputOf(req))),
  );
}
