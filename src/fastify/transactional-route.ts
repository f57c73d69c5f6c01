/**
 * `transactionalRoute`: a Fastify route handler whose idempotency record commits in the handler's own
 * database transaction (see `src/http/transactional-answer.ts` for why the plugin cannot do this).
 * @module
 */
import type {
  FastifyReply,
  FastifyRequest,
  onRequestHookHandler,
  preParsingHookHandler,
  RawReplyDefaultExpression,
  RawRequestDefaultExpression,
  RawServerDefault,
  RouteGenericInterface,
} from 'fastify';
import { isJsonContentType, keptRawBody } from '../http/fingerprint.js';
import { withAuthority } from '../http/host-header.js';
import {
  answerTransactionalRequest,
  requiredKey,
  type TransactionalResult,
  type TransactionalRunner,
  type TransactionOf,
} from '../http/transactional-answer.js';
import {
  pathAndQuery,
  type TransactionalRouteOptions,
  transactionalPolicy,
} from '../http/transactional-policy.js';
import { isRequestTooLargeError, requestTooLargeResponse } from '../http/unread-body.js';
import { jsonTextOf, keepJsonText } from './json-text.js';
import { requestBody } from './request-body.js';
import { sendAnswer } from './send.js';

/**
 * Options of {@link transactionalRoute}: the plugin's `headerName`, `minKeyLength`, `replayHeaders`,
 * `fingerprintHeaders`, `scopeCookies`, `scopeHeaders`, `storeServerErrors`, `retentionMs`,
 * `requestBodyLimit` (a body the parser left to the handler or handed on as a stream, read for the
 * fingerprint; over it 413, no transaction; `false` leaves it out), `maxBodyBytes` (over it an answer
 * is refused before COMMIT) and `asyncContext` (`currentIdempotency()` in the handler; the plugin's does
 * not reach the route), and `scope(request)`, which may be async.
 */
export type FastifyTransactionalRouteOptions = TransactionalRouteOptions<FastifyRequest>;

// The route's own generic (its `Body`…), so that `app.post(url, { onRequest, preParsing }, route)`
// infers one from the hooks.
type RouteGenericOf<Req> =
  Req extends FastifyRequest<infer RouteGeneric> ? RouteGeneric : RouteGenericInterface;

/**
 * The route handler {@link transactionalRoute} makes, with the hooks that check its key first and keep
 * its JSON text.
 */
export interface FastifyTransactionalHandler<Req extends FastifyRequest = FastifyRequest> {
  (request: Req, reply: FastifyReply): Promise<FastifyReply>;
  /**
   * An `onRequest` hook for the route (`{ onRequest: route.requireKey }`) that answers a missing or
   * invalid key (400 `missing_key` / `invalid_key`, with the route's `headerName` and `minKeyLength`)
   * before the body is read, and otherwise passes on: so that a request without a usable key is refused
   * before its body is parsed, and a body your `preValidation` (or schema) refuses (a 400 of your own,
   * nothing stored, before the claim) is refused only for requests whose key is good. The route checks
   * the key again either way.
   * @example
   * const route = transactionalRoute(transactional, createPayment);
   * app.post('/payments', { onRequest: route.requireKey, preValidation: validPayment }, route);
   */
  readonly requireKey: onRequestHookHandler<
    RawServerDefault,
    RawRequestDefaultExpression,
    RawReplyDefaultExpression,
    RouteGenericOf<Req>
  >;
  /**
   * A `preParsing` hook for the route (`{ preParsing: route.keepJsonText }`) that keeps the JSON text of
   * requests with a key, as the plugin's `keepJsonText` does: Fastify's parser rounds numbers a double
   * cannot hold, so without the text (or a `request.rawBody` of the app's) a key reused for another int64
   * id is replayed instead of refused with 422. The plugin cannot do it for this route: it is off there.
   */
  readonly keepJsonText: preParsingHookHandler<
    RawServerDefault,
    RawRequestDefaultExpression,
    RawReplyDefaultExpression,
    RouteGenericOf<Req>
  >;
}

/**
 * A Fastify handler that runs `handler` once per `Idempotency-Key` inside `transactional`'s database
 * transaction (`postgresTransactional` or `sqliteTransactional`): the claim, the handler's writes through
 * `tx` and the stored answer commit together, or not at all, with the plugin's answers (the replay with
 * `Idempotent-Replayed: true`, 400 / 409 / 422 / 503 problems; a 5xx answer rolled back and not stored,
 * unless `storeServerErrors: true`). Where the plugin is registered, give the route
 * `config: { idempotency: false }`: the plugin would otherwise claim the key first, and the transaction
 * would answer `mismatch`. On SQLite the handler must be synchronous. Its own errors roll everything back
 * and reach Fastify's error handler; nothing is stored.
 * @throws InvalidOptionsError at creation, for a bad option (as the plugin's registration).
 * @example
 * // `Req` from the handler's annotation: `request.body` is typed (else `unknown`).
 * type CreatePayment = FastifyRequest<{ Body: { amount: number } }>;
 * const route = transactionalRoute(transactional, async (request: CreatePayment, tx) => {
 *   const { rows } = await tx.query('INSERT INTO payments (amount) VALUES ($1) RETURNING id', [request.body.amount]);
 *   return { status: 201, body: rows[0] };
 * });
 * app.post('/payments', { config: { idempotency: false }, preParsing: route.keepJsonText }, route);
 */
export function transactionalRoute<
  Runner extends TransactionalRunner<unknown>,
  Req extends FastifyRequest = FastifyRequest,
>(
  transactional: Runner,
  handler: (request: Req, tx: TransactionOf<Runner>) => TransactionalResult<Runner>,
  options: FastifyTransactionalRouteOptions = {},
): FastifyTransactionalHandler<Req> {
  const policy = transactionalPolicy('transactionalRoute', transactional, handler, options);
  const bodyLimit = policy.route.requestBodyLimit;
  const route = async (request: Req, reply: FastifyReply) => {
    // A body the parser left to the handler (`@fastify/multipart`) or handed on as a stream is read for
    // the fingerprint as the plugin reads it (`./request-body.ts`), with its `requestBodyLimit`: larger
    // is 413 before any transaction; `false` leaves it unread and out of the fingerprint.
    let body: unknown;
    try {
      body = await requestBody(request, bodyLimit);
    } catch (error) {
      if (!isRequestTooLargeError(error)) throw error;
      return sendAnswer(request, reply, requestTooLargeResponse(error.limit));
    }
    const facts = {
      request,
      method: request.method,
      ...pathAndQuery(request.raw.url ?? request.url),
      // On HTTP/2 the host is the `:authority` pseudo-header, and there is no `host`.
      header: (name: string) =>
        withAuthority(name, request.headers[name], () => request.headers[':authority']),
      body,
      rawBody: keptRawBody(request) ?? jsonTextOf(request),
    };
    const answer = await answerTransactionalRequest(transactional, policy, facts, (tx) =>
      handler(request, tx),
    );
    return sendAnswer(request, reply, answer);
  };
  // Only requests the route fingerprints a JSON body of, when the app keeps no text of its own.
  const keepText: preParsingHookHandler = (request, _reply, payload, done) => {
    const { headers } = request;
    const wanted =
      headers[policy.route.headerName] !== undefined &&
      isJsonContentType(headers['content-type']) &&
      keptRawBody(request) === undefined;
    done(null, wanted ? keepJsonText(request, payload) : payload);
  };
  // Answered from the hook without calling `done`: Fastify sends it and skips the rest of the route.
  const requireKey: onRequestHookHandler = (request, reply, done) => {
    const read = requiredKey(request.headers[policy.route.headerName], policy.route);
    if ('problem' in read) sendAnswer(request, reply, read.problem);
    else done();
  };
  return Object.assign(route, {
    requireKey: requireKey as FastifyTransactionalHandler<Req>['requireKey'],
    keepJsonText: keepText as FastifyTransactionalHandler<Req>['keepJsonText'],
  });
}
