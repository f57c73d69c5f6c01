/**
 * `transactionalRoute`: an Express route whose idempotency record commits in the handler's own database
 * transaction (see `src/http/transactional-answer.ts` for why the middleware cannot do this).
 * @module
 */
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { replayedHeaderSet } from '../http/headers.js';
import { credentialScope } from '../http/scope.js';
import {
  answerInTransaction,
  type TransactionalRouteOptions as BaseOptions,
  type TransactionalAnswer,
  type TransactionalRunner,
  transactionalClaim,
} from '../http/transactional-answer.js';
import { send } from './send.js';

/** Options of {@link transactionalRoute}. */
export type TransactionalRouteOptions = BaseOptions<Request>;

/**
 * An Express handler that runs `handler` once per `Idempotency-Key` inside `transactional`'s database
 * transaction: the claim, the handler's writes through `tx` (business rows, outbox rows) and the stored
 * answer commit together, or not at all. Retries get the stored answer (`Idempotent-Replayed: true`), a
 * retry while it runs 409 + `Retry-After` (or, on PostgreSQL, waits for it), a different request under the
 * key 422, a missing or invalid key 400, an unreachable database 503 (all `application/problem+json`). The
 * key is required. Mount it after your JSON body parser (the body is part of the fingerprint). The
 * handler's own errors roll everything back and go to `next(error)`; nothing is stored.
 *
 * On SQLite (`sqliteTransactional`) the handler must be synchronous: better-sqlite3 cannot keep a
 * transaction open across an `await`.
 * @example
 * const transactional = postgresTransactional({ pool });
 * app.post('/payments', express.json(), transactionalRoute(transactional, async (req, tx) => {
 *   const { rows } = await tx.query('INSERT INTO payments (amount) VALUES ($1) RETURNING id', [req.body.amount]);
 *   await enqueue(tx, { topic: 'payment.created', payload: rows[0] });
 *   return { status: 201, body: rows[0], headers: { location: `/payments/${rows[0].id}` } };
 * }));
 */
export function transactionalRoute<Tx>(
  transactional: TransactionalRunner<Tx>,
  handler: (req: Request, tx: Tx) => TransactionalAnswer | Promise<TransactionalAnswer>,
  options: TransactionalRouteOptions = {},
): RequestHandler {
  const allowed = replayedHeaderSet(options.replayHeaders);
  return (req: Request, res: Response, next: NextFunction) => {
    let claim: ReturnType<typeof transactionalClaim>;
    try {
      const url = req.originalUrl ?? req.url;
      const q = url.indexOf('?');
      claim = transactionalClaim(
        {
          keyHeader: req.headers['idempotency-key'],
          method: req.method,
          path: q === -1 ? url : url.slice(0, q),
          query: q === -1 ? '' : url.slice(q + 1),
          contentType: req.headers['content-type'],
          body: req.body as unknown,
        },
        options.scope?.(req) ?? credentialScope(req.headers.authorization, req.headers.cookie),
      );
    } catch (error) {
      next(error);
      return;
    }
    if ('problem' in claim) {
      send(req, res, claim.problem);
      return;
    }
    answerInTransaction(transactional, claim, (tx) => handler(req, tx), allowed).then(
      (answer) => send(req, res, answer),
      next,
    );
  };
}
