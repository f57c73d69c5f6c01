/**
 * `transactionalHandler`: a fetch-style handler whose idempotency record commits in the handler's own
 * database transaction (see `src/http/transactional-answer.ts` for why the wrapper cannot do this).
 * @module
 */
import { isJsonContentType } from '../http/fingerprint.js';
import { withAuthority } from '../http/host-header.js';
import {
  answerTransactionalRequest,
  type TransactionalResult,
  type TransactionalRunner,
  type TransactionOf,
} from '../http/transactional-answer.js';
import { type BodyReadingRouteOptions, transactionalPolicy } from '../http/transactional-policy.js';
import { isRequestTooLargeError, requestTooLargeResponse } from '../http/unread-body.js';
import { announcedBody, readBodyUpTo, toWebResponse } from '../http/web.js';
import { isUnreadableBody, unreadableBodyError } from './used-body.js';

/**
 * Options of {@link transactionalHandler}: `withIdempotency`'s `headerName`, `minKeyLength`,
 * `replayHeaders`, `fingerprintHeaders`, `scopeCookies`, `storeServerErrors`, `retentionMs`,
 * `maxBodyBytes` (over it an answer is refused before COMMIT), `requestBodyLimit` (over it a request
 * gets 413, no transaction) and `asyncContext` (`currentIdempotency()` in the handler), and
 * `scope(request)`, which may be async.
 */
export type TransactionalHandlerOptions = BodyReadingRouteOptions<Request>;

/**
 * Wrap `handler` so that it runs once per `Idempotency-Key` inside `transactional`'s database transaction
 * (`postgresTransactional` or `sqliteTransactional`): the claim, the handler's writes through `tx` and the
 * stored answer commit together, or not at all. The answers are `withIdempotency`'s: the replay
 * (`Idempotent-Replayed: true`), 400 `missing_key` / `invalid_key`, 409 `in_progress` + `Retry-After`, 422
 * `key_mismatch`, 503 `store_unavailable`; a 5xx answer is rolled back and not stored, unless
 * `storeServerErrors: true`. The key is required. The handler gets the body already read (parsed when it
 * is JSON, else its bytes; the fingerprint reads the bytes, so int64 ids are compared exactly), since on
 * SQLite it must be synchronous: better-sqlite3 cannot keep a transaction open across an `await` (an
 * `async` handler does not compile there). Its own errors roll everything back and reject.
 * @throws InvalidOptionsError at creation, for a bad option (as `withIdempotency`).
 * @example
 * export const POST = transactionalHandler(transactional, async (request, tx, body) => {
 *   const { rows } = await tx.query('INSERT INTO payments (amount) VALUES ($1) RETURNING id', [body.amount]);
 *   return { status: 201, body: rows[0] };
 * });
 */
export function transactionalHandler<Runner extends TransactionalRunner<unknown>, Body = unknown>(
  transactional: Runner,
  handler: (request: Request, tx: TransactionOf<Runner>, body: Body) => TransactionalResult<Runner>,
  options: TransactionalHandlerOptions = {},
): (request: Request) => Promise<Response> {
  const policy = transactionalPolicy('transactionalHandler', transactional, handler, options, true);
  // Checked by `transactionalPolicy`: never `false` here.
  const limit = policy.route.requestBodyLimit as number;
  return async (request) => {
    const url = new URL(request.url);
    let bytes: Uint8Array | undefined;
    // Read before the wrapper: refused, nothing claimed (`./used-body.ts`).
    if (isUnreadableBody(request)) throw unreadableBodyError(request, 'transactionalHandler');
    try {
      bytes = request.body === null ? undefined : await bodyOf(request, limit);
    } catch (error) {
      // Over `requestBodyLimit`: answered 413, no transaction (anything else is rethrown).
      if (!isRequestTooLargeError(error)) throw error;
      return toWebResponse(requestTooLargeResponse(error.limit));
    }
    // Typed by the handler's own annotation (`body: { amount: number }`): what it declares it reads.
    // Parsed once, out of the transaction (PostgreSQL may run the handler again after a serialization
    // failure).
    const body = parsedBody(bytes, request.headers.get('content-type') ?? undefined) as Body;
    const facts = {
      request,
      method: request.method,
      path: url.pathname,
      query: url.search,
      // HTTP/2 through @hono/node-server carries no `host` header: the URL's host is the `:authority`.
      header: (name: string) =>
        withAuthority(name, request.headers.get(name), () => url.host || undefined),
      body: bytes,
    };
    return toWebResponse(
      await answerTransactionalRequest(transactional, policy, facts, (tx) =>
        handler(request, tx, body),
      ),
    );
  };
}

/**
 * The body, at most `limit` bytes: refused without reading when its `Content-Length` says it is larger,
 * else read whole (the HTTP framing stops it at that length); a chunked one read until it goes over.
 * @throws (rejects with) RequestTooLargeError past `limit`.
 */
function bodyOf(request: Request, limit: number): Promise<Uint8Array> {
  return (
    announcedBody(request.headers.get('content-length'), limit, () => request.arrayBuffer()) ??
    readBodyUpTo(request.body, limit)
  );
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
