/**
 * `transactionalHandler`: a fetch-style handler whose idempotency record commits in the handler's own
 * database transaction (see `src/http/transactional-answer.ts` for why the wrapper cannot do this).
 * @module
 */
import { isJsonContentType } from '../http/fingerprint.js';
import { replayedHeaderSet } from '../http/headers.js';
import { credentialScope } from '../http/scope.js';
import {
  answerInTransaction,
  type TransactionalAnswer,
  type TransactionalRunner,
  transactionalClaim,
} from '../http/transactional-answer.js';
import { toWebResponse } from '../http/web.js';

/** Options of {@link transactionalHandler}. */
export interface TransactionalHandlerOptions {
  /**
   * Who is calling: records are never shared across scopes. Return (or resolve to) `undefined` for the
   * default, a digest of the request's `Authorization` and `Cookie` headers.
   */
  scope?: (request: Request) => string | undefined | Promise<string | undefined>;
  /** Header names replayed besides content-type, location, cache-control and etag. */
  replayHeaders?: readonly string[];
}

/**
 * Wrap `handler` so that it runs once per `Idempotency-Key` inside `transactional`'s database transaction
 * (`postgresTransactional` or `sqliteTransactional`): the claim, the handler's writes through `tx` and the
 * stored answer commit together, or not at all. The answers are `withIdempotency`'s: the replay
 * (`Idempotent-Replayed: true`), 400 `missing_key` / `invalid_key`, 409 `in_progress` + `Retry-After`, 422
 * `key_mismatch`, 503 `store_unavailable`. The key is required. The handler gets the body already read
 * (parsed when it is JSON, else its bytes), since on SQLite it must be synchronous: better-sqlite3 cannot
 * keep a transaction open across an `await`. Its own errors roll everything back and reject.
 * @example
 * export const POST = transactionalHandler(transactional, async (request, tx, body) => {
 *   const { rows } = await tx.query('INSERT INTO payments (amount) VALUES ($1) RETURNING id', [body.amount]);
 *   return { status: 201, body: rows[0] };
 * });
 */
export function transactionalHandler<Tx, Body = unknown>(
  transactional: TransactionalRunner<Tx>,
  handler: (
    request: Request,
    tx: Tx,
    body: Body,
  ) => TransactionalAnswer | Promise<TransactionalAnswer>,
  options: TransactionalHandlerOptions = {},
): (request: Request) => Promise<Response> {
  const allowed = replayedHeaderSet(options.replayHeaders);
  return async (request) => {
    const url = new URL(request.url);
    const contentType = request.headers.get('content-type') ?? undefined;
    const bytes = request.body === null ? undefined : new Uint8Array(await request.arrayBuffer());
    const claim = transactionalClaim(
      {
        keyHeader: request.headers.get('idempotency-key') ?? undefined,
        method: request.method,
        path: url.pathname,
        query: url.search,
        contentType,
        body: bytes,
      },
      (await options.scope?.(request)) ??
        credentialScope(request.headers.get('authorization'), request.headers.get('cookie')),
    );
    if ('problem' in claim) return toWebResponse(claim.problem);
    // Typed by the handler's own annotation (`body: { amount: number }`): what it declares it reads.
    const body = parsedBody(bytes, contentType) as Body;
    return toWebResponse(
      await answerInTransaction(transactional, claim, (tx) => handler(request, tx, body), allowed),
    );
  };
}

/** JSON parsed when the content type says JSON and it parses; else the bytes, for the handler to judge. */
function parsedBody(bytes: Uint8Array | undefined, contentType: string | undefined): unknown {
  if (bytes === undefined || bytes.byteLength === 0 || !isJsonContentType(contentType))
    return bytes;
  try {
    return JSON.parse(Buffer.from(bytes).toString('utf8'));
  } catch {
    return bytes;
  }
}
