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
  conflictResponse,
  credentialScope,
  type HttpOutcome,
  type HttpResponseData,
  httpFingerprint,
  httpResponseCodec,
  parseKeyHeader,
  problemResponse,
  replayResponse,
  type StoredResponse,
} from '../../src/http/index.js';
import { isInvalidKeyError, isStoreUnavailableError, type RunOutcome } from '../../src/index.js';

/** What the transactional mode needs to claim the request's key. */
export interface KeyedRequest {
  /** The client's key, parsed from `Idempotency-Key`. */
  key: string;
  /** Whose key it is: a digest of the credentials, so nothing is replayed to another caller. */
  scope: string;
  /** SHA-256 over method, path, query, content type and the canonical JSON body. */
  fingerprint: string;
  /** Stores the response (status, allow-listed headers, body bytes) for byte-exact replays. */
  codec: typeof httpResponseCodec;
}

/**
 * Read the key header; a request without a valid one gets the layer's 400 problem.
 * @returns the key, or the response to send instead.
 */
export function readKey(req: Request): { key: string } | { problem: HttpResponseData } {
  try {
    const parsed = parseKeyHeader(req.headers['idempotency-key']);
    if (parsed.present) return { key: parsed.key };
    return {
      problem: problemResponse('missing_key', {
        detail: 'This endpoint requires an Idempotency-Key header.',
      }),
    };
  } catch (error) {
    if (!isInvalidKeyError(error)) throw error;
    return { problem: problemResponse('invalid_key', { detail: error.message }) };
  }
}

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

/** The response for a transactional run's outcome. */
export function outcomeResponse(outcome: RunOutcome<HttpOutcome>): HttpResponseData {
  switch (outcome.status) {
    case 'executed':
      // The first answer: exactly what was stored, without the replay marker.
      return outcome.value.kind === 'response'
        ? { status: outcome.value.status, headers: outcome.value.headers, body: outcome.value.body }
        : replayResponse(outcome.value);
    case 'replayed':
      return replayResponse(outcome.value);
    case 'in_progress':
    case 'mismatch':
      return conflictResponse(outcome);
  }
}

/** The layer's answer to an error thrown by the transactional run, or `undefined` for the app's own. */
export function errorResponse(error: unknown): HttpResponseData | undefined {
  if (isStoreUnavailableError(error)) {
    return problemResponse('store_unavailable', {
      // Not "was not processed": a connection lost while COMMIT was on its way leaves that unknown.
      detail:
        'The request was not processed, or its answer was lost. Retry with the same key after the delay in ' +
        'Retry-After: it will not be processed twice.',
      retryAfterMs: error.retryAfterMs,
    });
  }
  if (isInvalidKeyError(error)) return problemResponse('invalid_key', { detail: error.message });
  return undefined;
}

/** Write `data` on an Express response. */
export function send(res: Response, data: HttpResponseData): void {
  res.status(data.status);
  for (const [name, value] of data.headers) res.append(name, value);
  res.end(Buffer.from(data.body));
}
