/**
 * `transactionalRoute`: an Express route whose idempotency record commits in the handler's own database
 * transaction (see `src/http/transactional-answer.ts` for why the middleware cannot do this).
 * @module
 */
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { isThenable } from '../core/thenable.js';
import { keptRawBody } from '../http/fingerprint.js';
import {
  answerTransactionalRequest,
  requiredKey,
  type TransactionalResult,
  type TransactionalRunner,
  type TransactionOf,
} from '../http/transactional-answer.js';
import {
  type TransactionalRouteOptions as BaseOptions,
  pathAndQuery,
  transactionalPolicy,
} from '../http/transactional-policy.js';
import { isRequestTooLargeError, requestTooLargeResponse } from '../http/unread-body.js';
import { requestBody } from './request-body.js';
import { send } from './send.js';

/**
 * Options of {@link transactionalRoute}: the middleware's `headerName`, `minKeyLength`, `replayHeaders`,
 * `fingerprintHeaders`, `scopeCookies`, `scopeHeaders`, `storeServerErrors`, `retentionMs`,
 * `requestBodyLimit` (the bodies and files on disk the route reads for the fingerprint; over it 413, no
 * transaction; `false` leaves them out), `maxBodyBytes` (over it an answer is refused before COMMIT) and
 * `asyncContext` (`currentIdempotency()` in the handler), and `scope(req)`, which may be async.
 */
export type TransactionalRouteOptions = BaseOptions<Request>;

/** The handler {@link transactionalRoute} makes, with the middleware that checks its key first. */
export interface TransactionalRouteHandler extends RequestHandler {
  /**
   * A middleware that answers a missing or invalid key (400 `missing_key` / `invalid_key`, with the
   * route's `headerName` and `minKeyLength`) before anything else runs, and otherwise passes on: mount it
   * before the body parser and your own checks of the body, so that a request without a usable key is
   * refused before its body is read, and a body you refuse (a 400 of your own, nothing stored, before the
   * claim) is refused only for requests whose key is good. The route checks the key again either way.
   * @example
   * const route = transactionalRoute(transactional, createPayment);
   * app.post('/payments', route.requireKey, express.json(), validPayment, route);
   */
  readonly requireKey: RequestHandler;
}

/**
 * An Express handler that runs `handler` once per `Idempotency-Key` inside `transactional`'s database
 * transaction: the claim, the handler's writes through `tx` (business rows, outbox rows) and the stored
 * answer commit together, or not at all. Retries get the stored answer (`Idempotent-Replayed: true`), a
 * retry while it runs 409 + `Retry-After` (or, on PostgreSQL, waits for it), a different request under the
 * key 422, a missing or invalid key 400, an unreachable database 503 (all `application/problem+json`). The
 * key is required. Mount it after your JSON body parser (the body is part of the fingerprint; with
 * `express.json({ verify: keepRawBody })` its text is, so int64 ids are compared exactly). A 5xx answer
 * rolls everything back and is sent without being stored (`storeServerErrors: true` keeps it), as the
 * middleware releases the key. The handler's own errors roll everything back and go to `next(error)`;
 * nothing is stored.
 *
 * On SQLite (`sqliteTransactional`) the handler must be synchronous: better-sqlite3 cannot keep a
 * transaction open across an `await`, and the handler's type says so (an `async` one does not compile).
 * @throws InvalidOptionsError at creation, for a bad option (as the middleware's factory).
 * @example
 * const transactional = postgresTransactional({ pool });
 * app.post('/payments', express.json({ verify: keepRawBody }), transactionalRoute(transactional, async (req, tx) => {
 *   const { rows } = await tx.query('INSERT INTO payments (amount) VALUES ($1) RETURNING id', [req.body.amount]);
 *   await enqueue(tx, { topic: 'payment.created', payload: rows[0] });
 *   return { status: 201, body: rows[0], headers: { location: `/payments/${rows[0].id}` } };
 * }));
 */
export function transactionalRoute<Runner extends TransactionalRunner<unknown>>(
  transactional: Runner,
  handler: (req: Request, tx: TransactionOf<Runner>) => TransactionalResult<Runner>,
  options: TransactionalRouteOptions = {},
): TransactionalRouteHandler {
  const policy = transactionalPolicy('transactionalRoute', transactional, handler, options);
  const { route } = policy;
  const bodyLimit = route.requestBodyLimit;
  const requireKey: RequestHandler = (req, res, next) => {
    const read = requiredKey(req.headers[route.headerName], route);
    if ('problem' in read) send(req, res, read.problem);
    else next();
  };
  const run = (req: Request, res: Response, next: NextFunction, body: unknown) => {
    const request = {
      request: req,
      method: req.method,
      ...pathAndQuery(req.originalUrl ?? req.url),
      header: (name: string) => req.headers[name],
      body,
      rawBody: keptRawBody(req),
    };
    answerTransactionalRequest(transactional, policy, request, (tx) => handler(req, tx)).then(
      (answer) => send(req, res, answer),
      next,
    );
  };
  // The body as the middleware fingerprints it (`./request-body.ts`), with its `requestBodyLimit`: a body
  // nobody has read (the handler reads the stream), a stream in `req.body` and the files an upload
  // middleware left on disk, read up to the limit (larger: 413, before any transaction); `false` leaves
  // them unread (files: name, type and size).
  const answer = (req: Request, res: Response, next: NextFunction) => {
    let body: unknown;
    try {
      body = requestBody(req, bodyLimit);
    } catch (error) {
      next(error);
      return;
    }
    if (!isThenable(body)) return run(req, res, next, body);
    body.then(
      (read) => run(req, res, next, read),
      (error: unknown) => {
        if (!isRequestTooLargeError(error)) return next(error);
        send(req, res, requestTooLargeResponse(error.limit));
      },
    );
  };
  return Object.assign(answer, { requireKey });
}
