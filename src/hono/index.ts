/**
 * `idempotency-kit/hono`: `Idempotency-Key` middleware for Hono 4. The handler can read the execution's
 * context with `c.get('idempotency')` or `currentIdempotency()`.
 *
 * Thin by design: the shared HTTP module decides; this file reads `c.req` and captures `c.res`.
 * @module
 */
import type { Context, MiddlewareHandler } from 'hono';
import {
  captureWebResponse,
  credentialScope,
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

export type { IdempotencyContext } from '../http/index.js';
export { currentIdempotency } from '../http/index.js';

declare module 'hono' {
  interface ContextVariableMap {
    /** Set by the idempotency middleware while the handler runs under a claim. */
    idempotency: IdempotencyContext;
  }
}

/** Options of {@link idempotency}: the route policy, the scope, and the engine (or its options). */
export type HonoIdempotencyOptions = HttpRouteOptions &
  EngineSource & {
    /**
     * Who is calling: records are never shared across scopes. Mount the middleware after authentication.
     * @default a digest of the Authorization and Cookie headers
     */
    scope?: (c: Context) => string | Promise<string>;
  };

/** The middleware, with `route()` to derive a middleware with different per-route options. */
export interface HonoIdempotency extends MiddlewareHandler {
  /** A middleware for one route, overriding some options (same engine). */
  route(options: HttpRouteOptions): MiddlewareHandler;
}

function facts(c: Context, scope: (c: Context) => string | Promise<string>): RequestFacts {
  const url = new URL(c.req.url);
  return {
    method: c.req.method,
    path: url.pathname,
    query: url.search,
    header: (name) => c.req.header(name),
    // Hono caches the body, so the handler (or a validator) can still read it in any form.
    body: async () =>
      c.req.raw.body === null ? undefined : new Uint8Array(await c.req.arrayBuffer()),
    scope: () => scope(c),
  };
}

/**
 * Create the middleware. Mount it after authentication and validation, before the handler.
 * @example
 * const idem = idempotency({ store: memoryStore() });
 * app.post('/orders', idem.route({ key: 'required' }), async (c) => c.json(await createOrder(await c.req.json()), 201));
 */
export function idempotency(options: HonoIdempotencyOptions): HonoIdempotency {
  const engine = resolveEngine(options);
  const base = routeOptionsOf(options);
  const scope =
    options.scope ??
    ((c: Context) => credentialScope(c.req.header('authorization'), c.req.header('cookie')));

  const create = (route: HttpRouteOptions): MiddlewareHandler => {
    const policy = resolvePolicy(base, route);
    return async (c, next) => {
      const decision = await decide(engine, policy, facts(c, scope));
      if (decision.action === 'pass') return next();
      if (decision.action === 'respond') return toWebResponse(decision.response);
      const { execution } = decision;
      c.set('idempotency', execution.context);
      await execution.enter(() => next());
      // Hono catches the handler's error and renders it through onError; release unless errors are kept.
      if (c.error !== undefined && !policy.storeServerErrors) {
        await execution.fail(c.error);
        return;
      }
      c.res = await captureWebResponse(c.res, execution);
    };
  };
  return Object.assign(create({}), { route: create });
}
