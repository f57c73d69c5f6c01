/**
 * `idempotency-kit/express`: `Idempotency-Key` middleware for Express 4 and 5.
 *
 * Thin by design: every policy decision is made by the shared HTTP module; this file only reads the
 * request, captures what the handler writes (`res.json`, `res.send`, `res.end`, `res.write` chunks and
 * piped streams all end in `write`/`end`) and writes replays and problems.
 * @module
 */

import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { keptRawBody } from '../http/fingerprint.js';
import {
  decide,
  type EngineSource,
  type HttpRouteOptions,
  type RequestFacts,
  resolveEngine,
  resolvePolicy,
  routeOptionsOf,
} from '../http/index.js';
import { checkAdapterOptions, scopeFunctionOption } from '../http/options.js';
import { isRequestTooLargeError, requestTooLargeResponse } from '../http/unread-body.js';
import { captureResponse } from './capture.js';
import { requestBody } from './request-body.js';
import { setRequestContext } from './request-context.js';
import { send } from './send.js';

export type { IdempotencyContext } from '../http/index.js';
export { currentIdempotency } from '../http/index.js';
export { keepRawBody } from './raw-body.js';

// Express types its request through this global namespace.
declare global {
  namespace Express {
    interface Request {
      /** The idempotency context while the handler runs under a claim, else `undefined`. */
      idempotency?: import('../http/index.js').IdempotencyContext;
    }
  }
}

/**
 * The policy of one route under the Express middleware: the shared options. A body no parser before the
 * middleware has read (`multer` or `express.text()` on the route after it) is read by the middleware, up
 * to `requestBodyLimit`, and handed back to the stream (see `HttpRouteOptions.requestBodyLimit`).
 */
export type ExpressRouteOptions = HttpRouteOptions;

/** Options of {@link idempotency}: the route policy, the scope, and the engine (or its options). */
export type ExpressIdempotencyOptions = ExpressRouteOptions &
  EngineSource & {
    /**
     * Who is calling: records are never shared across scopes. Mount the middleware after authentication
     * and return the principal or tenant id.
     * @default a digest of the Authorization and Cookie headers (only the cookies `scopeCookies`
     *   names, when set) and of the headers `scopeHeaders` names: credentials in any other header (an API
     *   key) put every caller in one scope unless they are named there or a scope function is given; also
     *   when the function gives (or resolves to) `undefined`, `null`, `''` or only whitespace
     */
    scope?: (req: Request) => string | Promise<string>;
  };

/** The middleware, with `route()` to derive a middleware with different per-route options. */
export interface ExpressIdempotency extends RequestHandler {
  /** A middleware for one route, overriding some options (same engine). */
  route(options: ExpressRouteOptions): RequestHandler;
}

/**
 * Create the middleware. Mount it after authentication and body parsing, before the handlers.
 * @example
 * const idem = idempotency({ store: redisStore({ client }) });
 * app.post('/orders', express.json(), idem.route({ key: 'required' }), async (req, res) => {
 *   res.status(201).json(await createOrder(req.body));
 * });
 */
export function idempotency(options: ExpressIdempotencyOptions): ExpressIdempotency {
  checkAdapterOptions(options, 'idempotency');
  const engine = resolveEngine(options);
  const base = routeOptionsOf(options);
  const scope = scopeFunctionOption(options.scope);

  const create = (route: ExpressRouteOptions): RequestHandler => {
    const policy = resolvePolicy(base, route);
    const bodyLimit = policy.requestBodyLimit;
    return (req: Request, res: Response, next: NextFunction) => {
      decide(engine, policy, new ExpressFacts(req, scope, bodyLimit)).then(
        (decision) => {
          if (decision.action === 'pass') return next();
          if (decision.action === 'respond') return send(req, res, decision.response);
          // Ended while the claim was in flight (`connect-timeout`'s 503 for a slow store): the handler has
          // not run, and nothing it writes could reach the client, so the key is released. (Only ended: a
          // middleware before the layer may flush the head of a streamed answer for the handler to write.) Captured
          // instead, the response's end was never seen, and the claim was held (its lease extended) for as
          // long as the process lived: every retry got 409.
          if (res.writableEnded) {
            void decision.execution.fail(
              new Error('The response was sent before the claim was made'),
            );
            return;
          }
          captureResponse(res, decision.execution);
          setRequestContext(req, decision.execution.context);
          decision.execution.enter(next);
        },
        (error: unknown) => {
          if (!isRequestTooLargeError(error)) return next(error);
          send(req, res, requestTooLargeResponse(error.limit));
        },
      );
    };
  };
  return Object.assign(create({}), { route: create });
}

/**
 * The request as the HTTP layer sees it. A class rather than an object of closures: one allocation per
 * request instead of four.
 */
class ExpressFacts implements RequestFacts {
  readonly method: string;
  readonly path: string;
  readonly query: string;

  constructor(
    private readonly req: Request,
    private readonly scopeOf: ((req: Request) => string | Promise<string>) | undefined,
    private readonly bodyLimit: number | false,
  ) {
    const url = req.originalUrl ?? req.url;
    const q = url.indexOf('?');
    this.method = req.method;
    this.path = q === -1 ? url : url.slice(0, q);
    this.query = q === -1 ? '' : url.slice(q + 1);
  }

  // Node joins repeated lines of an unknown header with ', ', which the key parser refuses as a list.
  header(name: string): string | readonly string[] | undefined {
    return this.req.headers[name];
  }

  // What a body parser before the middleware made of the body, or the bytes it reads itself
  // (`./request-body.ts`).
  body(): unknown {
    return requestBody(this.req, this.bodyLimit);
  }

  // A `rawBody` the app kept (express.json's `verify`) lets the fingerprint see JSON numbers exactly.
  rawBody(): Uint8Array | string | undefined {
    return keptRawBody(this.req);
  }

  scope(): string | Promise<string> | undefined {
    return this.scopeOf?.(this.req);
  }
}

export type { TransactionalAnswer } from '../http/transactional-answer.js';
export type {
  TransactionalRouteHandler,
  TransactionalRouteOptions,
} from './transactional-route.js';

export { transactionalRoute } from './transactional-route.js';
