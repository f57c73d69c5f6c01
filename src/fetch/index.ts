/**
 * `idempotency-kit/fetch`: make any fetch-style handler `(request: Request) => Response` idempotent
 * (Next.js route handlers, Deno/Bun servers, Cloudflare-style workers with Node compatibility, Hono's
 * `app.fetch`…).
 *
 * Thin by design: the shared HTTP module decides; this file reads the `Request` and captures the
 * `Response` body.
 * @module
 */

import { withAuthority } from '../http/host-header.js';
import {
  captureWebResponse,
  credentialScope,
  type Decision,
  decide,
  type EngineSource,
  type HttpRouteOptions,
  type IdempotencyContext,
  type RequestFacts,
  resolveEngine,
  resolvePolicy,
  routeOptionsOf,
  toWebResponse,
} from '../http/index.js';
import {
  checkAdapterOptions,
  DEFAULT_REQUEST_BODY_LIMIT,
  scopeFunctionOption,
} from '../http/options.js';
import { announcedBody, readBodyUpTo, tooLargeDecision } from '../http/web.js';
import { isUnreadableBody, unreadableBodyError } from './used-body.js';

export type { IdempotencyContext } from '../http/index.js';
export { currentIdempotency } from '../http/index.js';

/** A fetch-style handler; extra arguments (a context, an env) are passed through untouched. */
export type FetchHandler<Args extends unknown[] = []> = (
  request: Request,
  ...args: Args
) => Response | Promise<Response>;

/** Options of {@link withIdempotency}: the route policy, the scope, and the engine (or its options). */
export type FetchIdempotencyOptions = HttpRouteOptions &
  EngineSource & {
    /**
     * Who is calling: records are never shared across scopes.
     * @default a digest of the Authorization and Cookie headers (only the cookies `scopeCookies`
     *   names, when set) and of the headers `scopeHeaders` names: credentials in any other header (an API
     *   key) put every caller in one scope unless they are named there or a scope function is given; also
     *   when the function gives (or resolves to) `undefined`, `null`, `''` or only whitespace
     */
    scope?: (request: Request) => string | Promise<string>;
  };

/**
 * The request's facts, reading the body from a clone so the handler still gets an unread body: at most
 * `bodyLimit` bytes (`requestBodyLimit`; a larger body rejects with a `RequestTooLargeError`), or none
 * with `false`.
 */
export function requestFacts(
  request: Request,
  scope: ((request: Request) => string | Promise<string>) | undefined,
  bodyLimit: number | false = DEFAULT_REQUEST_BODY_LIMIT,
): RequestFacts {
  const url = new URL(request.url);
  return {
    method: request.method,
    path: url.pathname,
    query: url.search,
    // HTTP/2 through @hono/node-server carries no `host` header: the URL's host is the `:authority`.
    header: (name) => withAuthority(name, request.headers.get(name), () => url.host || undefined),
    body: () => {
      if (request.body === null || bodyLimit === false) return undefined;
      // Read before the wrapper: refused, nothing claimed (`./used-body.ts`).
      if (isUnreadableBody(request)) throw unreadableBodyError(request, 'withIdempotency');
      const length = request.headers.get('content-length');
      return (
        announcedBody(length, bodyLimit, () => request.clone().arrayBuffer()) ??
        readBodyUpTo(request.clone().body, bodyLimit)
      );
    },
    scope: () => scope?.(request),
  };
}

const contexts = new WeakMap<Request, IdempotencyContext>();

/**
 * The idempotency context of `request` while the wrapped handler runs under a claim, else `undefined`.
 * Free of cost, unlike `currentIdempotency()`, which needs `asyncContext: true`.
 * @example
 * const handler = withIdempotency(async (req) => {
 *   const ctx = idempotencyOf(req);
 *   await charge({ idempotencyKey: ctx?.downstreamKey('charge') });
 *   return new Response(null, { status: 204 });
 * }, { store });
 */
export function idempotencyOf(request: Request): IdempotencyContext | undefined {
  return contexts.get(request);
}

/**
 * A digest of a `Request`'s credentials (`Authorization` and the whole `Cookie` header), for a `scope`
 * function that adds to it. Without a `scope` function the layer computes the same digest itself, with
 * the route's `scopeCookies` and `scopeHeaders`.
 */
export const defaultScope = (request: Request): string =>
  credentialScope(request.headers.get('authorization'), request.headers.get('cookie'));

/**
 * Wrap a handler. A response body of bytes or text is stored before the response is returned; a body
 * still being written (a stream) goes out as the handler writes it, captured on the way (up to
 * `maxBodyBytes`), and ends only once it is stored: either way an immediate retry gets the replay.
 * @example
 * const handler = withIdempotency(async (req) => Response.json(await createOrder(await req.json()), { status: 201 }),
 *   { store: sqliteStore({ database }), key: 'required' });
 */
export function withIdempotency<Args extends unknown[]>(
  handler: FetchHandler<Args>,
  options: FetchIdempotencyOptions,
): (request: Request, ...args: Args) => Promise<Response> {
  checkAdapterOptions(options, 'withIdempotency');
  const engine = resolveEngine(options);
  const policy = resolvePolicy(routeOptionsOf(options));
  const scope = scopeFunctionOption(options.scope);
  return async (request, ...args) => {
    let decision: Decision;
    try {
      decision = await decide(
        engine,
        policy,
        requestFacts(request, scope, policy.requestBodyLimit),
      );
    } catch (error) {
      // A body over `requestBodyLimit`: answered 413, nothing run or stored (anything else is rethrown).
      decision = tooLargeDecision(error);
    }
    if (decision.action === 'pass') return handler(request, ...args);
    if (decision.action === 'respond') return toWebResponse(decision.response);
    const { execution } = decision;
    contexts.set(request, execution.context);
    let response: Response;
    try {
      response = await execution.enter(() => handler(request, ...args));
    } catch (error) {
      await execution.fail(error);
      throw error;
    } finally {
      contexts.delete(request);
    }
    return captureWebResponse(response, execution);
  };
}
export type { TransactionalAnswer } from '../http/transactional-answer.js';
export type { TransactionalHandlerOptions } from './transactional-handler.js';
export { transactionalHandler } from './transactional-handler.js';
