/**
 * The `Idempotency-Key` semantics of POST /v1/payments, built from the HTTP module's own helpers so that
 * the answers are exactly the middleware's: the key parser (400 `missing_key` / `invalid_key`), the request
 * fingerprint, the credentials scope, the stored-response codec, the replay (`Idempotent-Replayed: true`)
 * and the problem documents (409 `in_progress` + Retry-After, 422 `key_mismatch`, 503 `store_unavailable`).
 *
 * Why not the `idempotency(…)` Express middleware itself: it claims the key through the engine, in its own
 * store round trip, and completes it after the handler has responded. Here the claim must commit in the
 * same database transaction as the payment row and the outbox row (the transactional mode), and on SQLite
 * that transaction is synchronous, which a middleware wrapping an asynchronous Express handler cannot be.
 * So the route drives the transactional mode itself and borrows everything else.
 *
 * In this repository the helpers come from `src/http` (internal); a published package would need them on
 * a public subpath.
 * @module
 */
import type { Request, Response } from 'express';
import {
  credentialScope,
  type HttpResponseData,
  httpFingerprint,
  httpResponseCodec,
  type StoredResponse,
  type TransactionalClaim,
} from '../../src/http/index.js';

/**
 * What the transactional mode needs to claim the request's key: the client's key, the credentials'
 * digest as scope, the request's fingerprint and the stored-response codec.
 */
export type KeyedRequest = TransactionalClaim;

/** The claim request of `req` under `key` (call after the JSON body is parsed). */
export function keyedRequest(req: Request, key: string): KeyedRequest {
  const url = req.originalUrl ?? req.url;
  const q = url.indexOf('?');
  return {
    key,
    scope: credentialScope(req.headers.authorization, req.headers.cookie),
    fingerprint: httpFingerprint({
      method: req.method,
      path: q === -1 ? url : url.slice(0, q),
      query: q === -1 ? '' : url.slice(q + 1),
      contentType: req.headers['content-type'],
      body: req.body as unknown,
    }),
    codec: httpResponseCodec,
  };
}

/** A JSON response as it is stored (and therefore replayed byte for byte). */
export function jsonResponse(
  status: number,
  value: unknown,
  headers: Array<[string, string]> = [],
): StoredResponse {
  return {
    kind: 'response',
    status,
    headers: [['content-type', 'application/json; charset=utf-8'], ...headers],
    body: Buffer.from(JSON.stringify(value), 'utf8'),
  };
}

/** The answers shared with the adapters' transactional routes (`src/http/transactional-answer.ts`). */
export {
  requiredKey,
  transactionalErrorResponse as errorResponse,
  transactionalOutcomeResponse as outcomeResponse,
} from '../../src/http/index.js';

/** Write `data` on an Express response. */
export function send(res: Response, data: HttpResponseData): void {
  res.status(data.status);
  for (const [name, value] of data.headers) res.append(name, value);
  res.end(Buffer.from(data.body));
}
