/**
 * An HTTP route on a transactional mode (`postgresTransactional`, `sqliteTransactional`): the claim, the
 * handler's writes and the stored response commit in one database transaction, and the answers are the
 * middleware's (400 `missing_key`/`invalid_key`, the replay with `Idempotent-Replayed: true`, 409
 * `in_progress` + `Retry-After`, 422 `key_mismatch`, 503 `store_unavailable`; a 5xx answer is not kept).
 * The middleware cannot give this: it claims through the engine, in a store call of its own, before the
 * handler's transaction exists. Framework-free; the adapters map their request and response onto it.
 * @module
 */

import type { RunOutcome } from '../core/engine.js';
import { InvalidOptionsError, isInvalidKeyError, isStoreUnavailableError } from '../core/errors.js';
import { scopeOption } from '../core/option-checks.js';
import { SCOPE_SOURCE, type ScopeSourced } from '../core/reserved-scopes.js';
import { isThenable } from '../core/thenable.js';
import { runWithContext } from './context.js';
import { conflictResponse, defaultScope, replayResponse } from './execution.js';
import { httpFingerprint } from './fingerprint.js';
import { parseKeyHeader } from './key-header.js';
import type { RoutePolicy } from './options.js';
import { type HttpResponseData, problemResponse } from './problem.js';
import { type HttpOutcome, httpResponseCodec, type StoredResponse } from './response-codec.js';
import { HTTP_SCOPE_SOURCE, isNoScope } from './scope.js';
import { stringBodyKind } from './string-body.js';
import { TransactionalContext } from './transactional-context.js';
import type { TransactionalPolicy, TransactionalRequest } from './transactional-policy.js';

/** What a transactional route's handler answers; it is stored with the record, in the same transaction. */
export interface TransactionalAnswer {
  /**
   * HTTP status (200–599). A 5xx rolls the transaction back and is sent without being stored (the retry
   * runs again), unless the route has `storeServerErrors: true`.
   */
  status: number;
  /**
   * The body: bytes (a `Uint8Array` such as a `Buffer`, any other `ArrayBuffer` view, an `ArrayBuffer`) or
   * a string are sent as they are (give their `content-type`), anything else as JSON
   * (`application/json; charset=utf-8`); none for an empty body.
   */
  body?: unknown;
  /**
   * Headers stored and replayed with it. Only replayable names (`content-type`, `location`,
   * `cache-control`, `etag`, and the route's `replayHeaders`): set any other on the framework's response
   * yourself, for the first answer only. A 5xx that is not stored may carry any header (`Retry-After`).
   */
  headers?: Readonly<Record<string, string | undefined>>;
}

/** The request a transactional mode claims (both modes take these fields). */
export interface TransactionalClaim {
  key: string;
  scope: string;
  fingerprint: string;
  codec: typeof httpResponseCodec;
  /** How long the answer is replayed, in ms; the mode's own `retentionMs` when absent. */
  retentionMs?: number;
}

/**
 * What the route needs of a transactional mode: `postgresTransactional(…)` or `sqliteTransactional(…)`.
 * It must roll back and reject with `fn`'s own error as it was thrown (both modes do). On SQLite the
 * handler must be synchronous (better-sqlite3 cannot keep a transaction across an `await`).
 */
export interface TransactionalRunner<Tx> {
  /**
   * `true` on a mode whose handlers must not return a promise (`sqliteTransactional`): the routes then
   * type their handler as returning a {@link TransactionalAnswer}, so an `async` one does not compile.
   */
  readonly synchronousHandlers?: true;
  runInTransaction(
    request: TransactionalClaim,
    // biome-ignore lint/suspicious/noExplicitAny: each mode types its own result (SQLite: not a promise).
    fn: (tx: Tx) => any,
  ): Promise<RunOutcome<unknown>>;
}

/** The transaction context `Runner`'s `runInTransaction` hands its function (`tx`). */
export type TransactionOf<Runner> = Runner extends {
  // biome-ignore lint/suspicious/noExplicitAny: matches each mode's own request, result and options.
  runInTransaction(request: any, fn: (tx: infer Tx) => any, ...rest: any[]): any;
}
  ? Tx
  : never;

/**
 * What a route's handler on `Runner` returns: the answer itself on a mode with `synchronousHandlers`
 * (SQLite; also when `Runner` is a union that may be one), else the answer or a promise of it.
 */
export type TransactionalResult<Runner> = [
  Extract<Runner, { readonly synchronousHandlers: true }>,
] extends [never]
  ? TransactionalAnswer | Promise<TransactionalAnswer>
  : TransactionalAnswer;

const DEFAULT_KEY_RULES = { headerName: 'idempotency-key', minKeyLength: 1 };

/** The key of a required key header, or the 400 answer when it is missing, invalid or too short. */
export function requiredKey(
  keyHeader: string | readonly string[] | null | undefined,
  rules: Pick<RoutePolicy, 'headerName' | 'minKeyLength'> = DEFAULT_KEY_RULES,
): { key: string } | { problem: HttpResponseData } {
  try {
    const parsed = parseKeyHeader(keyHeader ?? undefined);
    if (!parsed.present) {
      const name = rules.headerName === 'idempotency-key' ? 'Idempotency-Key' : rules.headerName;
      return {
        problem: problemResponse('missing_key', {
          detail: `This endpoint requires an ${name} header.`,
        }),
      };
    }
    if (parsed.key.length >= rules.minKeyLength) return { key: parsed.key };
    const detail = `Invalid idempotency key: must be at least ${rules.minKeyLength} characters long`;
    return { problem: problemResponse('invalid_key', { detail }) };
  } catch (error) {
    if (!isInvalidKeyError(error)) throw error;
    return { problem: problemResponse('invalid_key', { detail: error.message }) };
  }
}

/**
 * Answer `request` as the route's policy says: a 400 for its key, or `handler` run in `runner`'s
 * transaction under the claim (key, scope, fingerprint), and the middleware's answer to what came of it.
 * A synchronous handler stays synchronous inside the transaction (as SQLite's mode needs). With the
 * route's `asyncContext`, the handler runs with its `currentIdempotency()` context.
 * @returns the answer to send; rejects with the handler's own errors (after the rollback), an answer
 *   that cannot be stored, and what the scope function throws or a scope that is not a string.
 */
export async function answerTransactionalRequest<Runner extends TransactionalRunner<unknown>, Req>(
  runner: Runner,
  policy: TransactionalPolicy<Req>,
  request: TransactionalRequest<Req>,
  handler: (tx: TransactionOf<Runner>) => TransactionalAnswer | Promise<TransactionalAnswer>,
): Promise<HttpResponseData> {
  const { route } = policy;
  const read = requiredKey(request.header(route.headerName), route);
  if ('problem' in read) return read.problem;
  const claim: TransactionalClaim & ScopeSourced = {
    key: read.key,
    scope: await scopeOf(policy, request),
    fingerprint: fingerprintOf(route, request),
    codec: httpResponseCodec,
    // As the middleware's: a scope under a component's reserved prefix is keyed apart from its records.
    [SCOPE_SOURCE]: HTTP_SCOPE_SOURCE,
  };
  if (route.retentionMs !== undefined) claim.retentionMs = route.retentionMs;
  let outcome: RunOutcome<unknown>;
  try {
    // The runner hands `fn` its own transaction context: `TransactionOf<Runner>` by definition.
    outcome = await runner.runInTransaction(claim, (tx) => {
      // Only the handler runs in the context (`run`, never `enterWith`): what follows it here, the
      // completion and the framework's sending of the answer, sees none. Made anew for each transaction
      // (PostgreSQL's serialization retries run the handler again, with a new `tx`).
      const answer = route.asyncContext
        ? runWithContext(new TransactionalContext(claim.key, claim.scope, tx), () =>
            handler(tx as TransactionOf<Runner>),
          )
        : handler(tx as TransactionOf<Runner>);
      return isThenable(answer)
        ? Promise.resolve(answer).then((resolved) => committedAnswer(resolved, route))
        : committedAnswer(answer, route);
    });
  } catch (error) {
    if (error instanceof UncommittedAnswer) return error.response;
    const answer = transactionalErrorResponse(error);
    if (answer === undefined) throw error;
    return answer;
  }
  return transactionalOutcomeResponse(outcome as RunOutcome<HttpOutcome>);
}

// A header's value as one string: several lines joined (cookies with `; `, as HTTP/2 splits them).
function joined(value: string | readonly string[] | null | undefined, separator = ', ') {
  return typeof value === 'string' || value == null ? (value ?? undefined) : value.join(separator);
}

/**
 * The scope function's answer (awaited: it may be async), or the credentials' digest when it gives none
 * (`undefined`, `null`, `''` or only whitespace: {@link isNoScope}). Never no scope handed on: the modes
 * would key it as `''`, which every such caller shares, and a second user's retry would be replayed the
 * first user's answer.
 */
async function scopeOf<Req>(
  policy: TransactionalPolicy<Req>,
  request: TransactionalRequest<Req>,
): Promise<string> {
  const given = await policy.scope?.(request.request);
  if (!isNoScope(given)) return scopeOption(given);
  return defaultScope(policy.route, request);
}

// The middleware's fingerprint of the same request: the JSON text when kept, and the route's headers.
function fingerprintOf<Req>(route: RoutePolicy, request: TransactionalRequest<Req>): string {
  let headers: Record<string, string | undefined> | undefined;
  for (const name of route.fingerprintHeaders) {
    headers ??= {};
    headers[name] = joined(request.header(name));
  }
  const contentType = request.header('content-type');
  return httpFingerprint({
    method: request.method,
    path: request.path,
    query: request.query,
    contentType: typeof contentType === 'string' ? contentType : (contentType?.[0] ?? undefined),
    headers,
    body: request.body,
    rawBody: request.rawBody,
    stringBody: stringBodyKind(request.body, (name) => request.header(name)),
  });
}

/**
 * Thrown from inside the transaction to roll it back when the answer is one not to keep (a 5xx), and
 * caught outside it to send that answer. Never seen outside this module.
 */
class UncommittedAnswer extends Error {
  constructor(readonly response: HttpResponseData) {
    super('the handler answered a server error: rolled back, not stored');
  }
}

/**
 * The stored form of the handler's answer, checked: a header that would not be replayed is refused, so
 * that a replay never differs from the first answer in a header the handler chose, and so is a body over
 * `maxBodyBytes` (both roll the transaction back). A 5xx, unless the route stores them, throws the
 * {@link UncommittedAnswer} that rolls back: the client is told "not processed", so nothing may stay done.
 */
function committedAnswer(answer: TransactionalAnswer, route: RoutePolicy): StoredResponse {
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
  const kept = answer.status < 500 || route.storeServerErrors;
  const headers = answerHeaders(answer, kept ? route.replayHeaders : undefined);
  const body = bodyBytes(answer.body, headers);
  if (!kept) throw new UncommittedAnswer({ status: answer.status, headers, body });
  if (body.byteLength > route.maxBodyBytes) {
    throw new InvalidOptionsError(
      `transactional route: the answer's body (${body.byteLength} bytes) exceeds maxBodyBytes (${route.maxBodyBytes}); rolled back, nothing was stored`,
    );
  }
  return { kind: 'response', status: answer.status, headers, body };
}

// The answer's headers, lower-case; with `allowed`, only those (the others are refused).
function answerHeaders(
  answer: TransactionalAnswer,
  allowed: ReadonlySet<string> | undefined,
): Array<[string, string]> {
  const headers: Array<[string, string]> = [];
  for (const [name, value] of Object.entries(answer.headers ?? {})) {
    if (value === undefined) continue;
    const lower = name.toLowerCase();
    if (allowed !== undefined && !allowed.has(lower)) {
      throw new InvalidOptionsError(
        `transactional route: header '${name}' is not replayed (add it to replayHeaders, or set it on the response yourself)`,
      );
    }
    headers.push([lower, String(value)]);
  }
  return headers;
}

const JSON_TYPE = 'application/json; charset=utf-8';

// The body's bytes; a JSON body adds its content-type to `headers` unless the handler gave one.
function bodyBytes(body: unknown, headers: Array<[string, string]>): Uint8Array {
  if (body === undefined) return new Uint8Array();
  if (body instanceof Uint8Array) return body;
  // Bytes by another name: JSON.stringify would turn them into `{}` or `{"0":…}`.
  if (ArrayBuffer.isView(body))
    return new Uint8Array(body.buffer, body.byteOffset, body.byteLength);
  if (body instanceof ArrayBuffer) return new Uint8Array(body);
  if (typeof body === 'string') return Buffer.from(body, 'utf8');
  const text = JSON.stringify(body) as string | undefined;
  if (text === undefined) {
    throw new InvalidOptionsError('transactional route: the answer body is not a JSON value');
  }
  if (!headers.some(([name]) => name === 'content-type'))
    headers.unshift(['content-type', JSON_TYPE]);
  return Buffer.from(text, 'utf8');
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
