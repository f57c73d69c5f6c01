/**
 * An HTTP route on a transactional mode (`postgresTransactional`, `sqliteTransactional`): the claim, the
 * handler's writes and the stored response commit in one database transaction, and the answers are the
 * middleware's (400 `missing_key`/`invalid_key`, the replay with `Idempotent-Replayed: true`, 409
 * `in_progress` + `Retry-After`, 422 `key_mismatch`, 503 `store_unavailable`). The middleware cannot give
 * this: it claims through the engine, in a store call of its own, before the handler's transaction exists.
 * Framework-free; the adapters map their request and response onto it.
 * @module
 */

import type { RunOutcome } from '../core/engine.js';
import { InvalidOptionsError, isInvalidKeyError, isStoreUnavailableError } from '../core/errors.js';
import { isThenable } from '../core/thenable.js';
import { conflictResponse, replayResponse } from './execution.js';
import { type FingerprintParts, httpFingerprint } from './fingerprint.js';
import { parseKeyHeader } from './key-header.js';
import { type HttpResponseData, problemResponse } from './problem.js';
import { type HttpOutcome, httpResponseCodec, type StoredResponse } from './response-codec.js';

/** What a transactional route's handler answers; it is stored with the record, in the same transaction. */
export interface TransactionalAnswer {
  /** HTTP status. */
  status: number;
  /**
   * The body: a `Uint8Array` or a string is sent as it is (give its `content-type`), anything else as JSON
   * (`application/json; charset=utf-8`); none for an empty body.
   */
  body?: unknown;
  /**
   * Headers stored and replayed with it. Only replayable names (`content-type`, `location`,
   * `cache-control`, `etag`, and the route's `replayHeaders`): set any other on the framework's response
   * yourself, for the first answer only.
   */
  headers?: Readonly<Record<string, string | undefined>>;
}

/** The request a transactional mode claims (both modes take these fields). */
export interface TransactionalClaim {
  key: string;
  scope: string;
  fingerprint: string;
  codec: typeof httpResponseCodec;
}

/**
 * What the route needs of a transactional mode: `postgresTransactional(…)` or `sqliteTransactional(…)`.
 * On SQLite the handler must be synchronous (better-sqlite3 cannot keep a transaction across an `await`).
 */
export interface TransactionalRunner<Tx> {
  runInTransaction(
    request: TransactionalClaim,
    // biome-ignore lint/suspicious/noExplicitAny: each mode types its own result (SQLite: not a promise).
    fn: (tx: Tx) => any,
  ): Promise<RunOutcome<unknown>>;
}

/** The request facts the route reads, from any framework. */
export interface TransactionalRequestFacts extends Omit<FingerprintParts, 'headers'> {
  /** The `Idempotency-Key` header's value(s). */
  keyHeader: string | readonly string[] | undefined;
}

/** The key of a required `Idempotency-Key` header, or the 400 answer when it is missing or invalid. */
export function requiredKey(
  keyHeader: string | readonly string[] | undefined,
): { key: string } | { problem: HttpResponseData } {
  try {
    const parsed = parseKeyHeader(keyHeader);
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

/** The claim of a request, or the 400 answer when its key is missing or invalid. */
export function transactionalClaim(
  facts: TransactionalRequestFacts,
  scope: string,
): TransactionalClaim | { problem: HttpResponseData } {
  const read = requiredKey(facts.keyHeader);
  if ('problem' in read) return read;
  const { keyHeader: _, ...parts } = facts;
  return { key: read.key, scope, fingerprint: httpFingerprint(parts), codec: httpResponseCodec };
}

const JSON_TYPE = 'application/json; charset=utf-8';

/**
 * The stored form of the handler's answer (checked: a header that would not be replayed is refused, so
 * that a replay never differs from the first answer in a header the handler chose).
 */
export function storedAnswer(
  answer: TransactionalAnswer,
  allowed: ReadonlySet<string>,
): StoredResponse {
  if (
    typeof answer !== 'object' ||
    answer === null ||
    !Number.isInteger(answer.status) ||
    answer.status < 200 ||
    answer.status > 599
  ) {
    throw new InvalidOptionsError(
      'transactional route: the handler must return { status (200-599), body?, headers? }',
    );
  }
  const headers: Array<[string, string]> = [];
  for (const [name, value] of Object.entries(answer.headers ?? {})) {
    if (value === undefined) continue;
    const lower = name.toLowerCase();
    if (!allowed.has(lower)) {
      throw new InvalidOptionsError(
        `transactional route: header '${name}' is not replayed (add it to replayHeaders, or set it on the response yourself)`,
      );
    }
    headers.push([lower, String(value)]);
  }
  const { body } = answer;
  let bytes: Uint8Array;
  if (body === undefined) bytes = new Uint8Array();
  else if (body instanceof Uint8Array) bytes = body;
  else if (typeof body === 'string') bytes = Buffer.from(body, 'utf8');
  else {
    bytes = Buffer.from(JSON.stringify(body), 'utf8');
    if (!headers.some(([name]) => name === 'content-type'))
      headers.unshift(['content-type', JSON_TYPE]);
  }
  return { kind: 'response', status: answer.status, headers, body: bytes };
}

/**
 * Run `handler` in `runner`'s transaction under `claim`, and answer as the middleware would. A synchronous
 * handler stays synchronous inside the transaction (as SQLite's mode needs).
 * @returns the answer to send; rejects with the handler's own errors (after the rollback).
 */
export async function answerInTransaction<Tx>(
  runner: TransactionalRunner<Tx>,
  claim: TransactionalClaim,
  handler: (tx: Tx) => TransactionalAnswer | Promise<TransactionalAnswer>,
  allowed: ReadonlySet<string>,
): Promise<HttpResponseData> {
  let outcome: RunOutcome<unknown>;
  try {
    outcome = await runner.runInTransaction(claim, (tx: Tx) => {
      const answer = handler(tx);
      return isThenable(answer)
        ? Promise.resolve(answer).then((resolved) => storedAnswer(resolved, allowed))
        : storedAnswer(answer, allowed);
    });
  } catch (error) {
    const answer = transactionalErrorResponse(error);
    if (answer === undefined) throw error;
    return answer;
  }
  return transactionalOutcomeResponse(outcome as RunOutcome<HttpOutcome>);
}

/** The answer to a transactional run's outcome: the first answer as stored, a replay, 409 or 422. */
export function transactionalOutcomeResponse(outcome: RunOutcome<HttpOutcome>): HttpResponseData {
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

/**
 * The layer's answer to an error a transactional run rejected with: 503 `store_unavailable`, 400
 * `invalid_key`; `undefined` for any other (the handler's own, for the application to answer).
 */
export function transactionalErrorResponse(error: unknown): HttpResponseData | undefined {
  if (isStoreUnavailableError(error)) {
    return problemResponse('store_unavailable', {
      // Not "was not processed": a connection lost while COMMIT was on its way leaves that unknown.
      detail:
        'The request was not processed, or its answer was lost. Retry with the same key after the delay in Retry-After: it will not be processed twice.',
      retryAfterMs: error.retryAfterMs,
    });
  }
  if (isInvalidKeyError(error)) return problemResponse('invalid_key', { detail: error.message });
  return undefined;
}

/** Options of the adapters' transactional routes, for a framework request `Req`. */
export interface TransactionalRouteOptions<Req> {
  /**
   * Who is calling: records are never shared across scopes. Return `undefined` for the default, a digest
   * of the request's `Authorization` and `Cookie` headers. Mount the route after authentication.
   */
  scope?: (request: Req) => string | undefined;
  /** Header names replayed besides content-type, location, cache-control and etag. */
  replayHeaders?: readonly string[];
}
