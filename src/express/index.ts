/**
 * `idempotency-kit/express`: `Idempotency-Key` middleware for Express 4 and 5.
 *
 * Thin by design: every policy decision is made by the shared HTTP module; this file only reads the
 * request, captures what the handler writes (`res.json`, `res.send`, `res.end`, `res.write` chunks and
 * piped streams all end in `write`/`end`) and writes replays and problems.
 * @module
 */

import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { InvalidOptionsError } from '../core/errors.js';
import {
  decide,
  type EngineSource,
  type HttpRouteOptions,
  problemResponse,
  type RequestFacts,
  resolveEngine,
  resolvePolicy,
  routeOptionsOf,
} from '../http/index.js';
import { captureResponse } from './capture.js';
import { setRequestContext } from './request-context.js';
import { send } from './send.js';
import {
  DEFAULT_REQUEST_BODY_LIMIT,
  hasUnreadBody,
  isRequestTooLargeError,
  readUnreadBody,
} from './unread-body.js';

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

/** The policy of one route under the Express middleware: the shared options, and unread bodies. */
export interface ExpressRouteOptions extends HttpRouteOptions {
  /**
   * A request body that no body parser before the middleware has read (`multer` or `express.text()`
   * mounted on the route after it, or no parser at all) is read by the middleware itself, up to this
   * many bytes, so that the fingerprint covers it; the bytes are handed back to the stream, and the
   * parsers and handler after the middleware read the body as usual. A larger one is refused with
   * `413 request_too_large` (nothing runs, nothing is stored): the layer would otherwise take any two
   * such bodies for the same request and replay one's answer to the other. Bodies a parser before the
   * middleware has read (the documented setup) are fingerprinted as parsed, and never read again.
   *
   * `false` leaves such bodies unread and out of the fingerprint (what earlier versions did): only for a route
   * whose `fingerprintHeaders` carry a digest of the body the client computes (`Content-Digest`), so that
   * a large upload streams through without being held in memory.
   * @default 1048576 (1 MiB)
   */
  requestBodyLimit?: number | false;
}

/** Options of {@link idempotency}: the route policy, the scope, and the engine (or its options). */
export type ExpressIdempotencyOptions = ExpressRouteOptions &
  EngineSource & {
    /**
     * Who is calling: records are never shared across scopes. Mount the middleware after authentication
     * and return the principal or tenant id. @default a digest of the Authorization and Cookie headers
     *   (only the cookies `scopeCookies` names, when it is set)
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
  const engine = resolveEngine(options);
  const base = routeOptionsOf(options);
  const scope = options.scope;

  const create = (route: ExpressRouteOptions): RequestHandler => {
    const policy = resolvePolicy(base, route);
    const bodyLimit = requestBodyLimit(route.requestBodyLimit ?? options.requestBodyLimit);
    return (req: Request, res: Response, next: NextFunction) => {
      decide(engine, policy, new ExpressFacts(req, scope, bodyLimit)).then(
        (decision) => {
          if (decision.action === 'pass') return next();
          if (decision.action === 'respond') return send(req, res, decision.response);
          captureResponse(res, decision.execution);
          setRequestContext(req, decision.execution.context);
          decision.execution.enter(next);
        },
        (error: unknown) => {
          if (!isRequestTooLargeError(error)) return next(error);
          send(req, res, tooLarge(error.limit));
        },
      );
    };
  };
  return Object.assign(create({}), { route: create });
}

// Checked, not coerced: a limit from a config file or the environment may be a string.
function requestBodyLimit(value: number | false | undefined): number | false {
  if (value === undefined) return DEFAULT_REQUEST_BODY_LIMIT;
  if (value === false || (Number.isSafeInteger(value) && value >= 0)) return value;
  throw new InvalidOptionsError(
    `requestBodyLimit: must be a non-negative integer or false, got ${JSON.stringify(value)}`,
  );
}

const tooLarge = (limit: number) =>
  problemResponse('request_too_large', {
    detail: `This endpoint takes request bodies of at most ${limit} bytes with an idempotency key.`,
  });

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

  // What a body parser before the middleware made of the body; else the bytes nobody has read yet
  // (see `unread-body.ts`). An empty read keeps `req.body` (`{}` on Express 4), as fingerprinted before.
  body(): unknown {
    const req = this.req;
    if (this.bodyLimit === false || !hasUnreadBody(req)) return req.body as unknown;
    return readUnreadBody(req, this.bodyLimit).then((bytes) =>
      bytes.byteLength === 0 ? (req.body as unknown) : bytes,
    );
  }

  // A `rawBody` the app kept (express.json's `verify`) lets the fingerprint see JSON numbers exactly.
  rawBody(): Uint8Array | string | undefined {
    const raw = (this.req as { rawBody?: unknown }).rawBody;
    return raw instanceof Uint8Array || typeof raw === 'string' ? raw : undefined;
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
