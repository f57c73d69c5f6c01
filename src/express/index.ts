/**
 * `idempotency-kit/express`: `Idempotency-Key` middleware for Express 4 and 5.
 *
 * Thin by design: every policy decision is made by the shared HTTP module; this file only reads the
 * request, captures what the handler writes (`res.json`, `res.send`, `res.end`, `res.write` chunks and
 * piped streams all end in `write`/`end`) and writes replays and problems.
 * @module
 */

import { createHash } from 'node:crypto';
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
import {
  hasUnreadBody,
  isRequestTooLargeError,
  readUnreadBody,
  requestTooLargeResponse,
} from '../http/unread-body.js';
import { captureResponse } from './capture.js';
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

  // What a body parser before the middleware made of the body (with the files multer took out of it); else the bytes nobody has read yet (see
  // `../http/unread-body.ts`). An empty read keeps `req.body` (`{}` on Express 4), as fingerprinted before.
  body(): unknown {
    const req = this.req;
    if (this.bodyLimit === false || !hasUnreadBody(req)) return parsedBody(req);
    return readUnreadBody(req, this.bodyLimit).then((bytes) =>
      bytes.byteLength === 0 ? (req.body as unknown) : bytes,
    );
  }

  // A `rawBody` the app kept (express.json's `verify`) lets the fingerprint see JSON numbers exactly.
  rawBody(): Uint8Array | string | undefined {
    return keptRawBody(this.req);
  }

  scope(): string | Promise<string> | undefined {
    return this.scopeOf?.(this.req);
  }
}

/** A file as multer describes it (`req.file`, `req.files`): `buffer` with memory storage, `path` on disk. */
interface UploadedFile {
  fieldname?: unknown;
  originalname?: unknown;
  mimetype?: unknown;
  size?: unknown;
  buffer?: unknown;
}

/**
 * The body a parser before the middleware left in `req.body`, and the files multer mounted before it took
 * out of the stream (`req.file`, `req.files`): it leaves only the text fields in `req.body`, and two
 * uploads of different files would fingerprint alike. Without a file, `req.body` as it always was (a route
 * with `upload.array()` sets `req.files` to `[]`), so fingerprints stored before stay the same.
 */
function parsedBody(req: Request): unknown {
  const { file, files } = req as { file?: unknown; files?: unknown };
  if (file === undefined && files === undefined) return req.body as unknown;
  const uploads: UploadedFile[] = [];
  if (typeof file === 'object' && file !== null) uploads.push(file);
  if (Array.isArray(files)) uploads.push(...(files as UploadedFile[]));
  else if (typeof files === 'object' && files !== null) {
    // `upload.fields()`: arrays by field name, in the order their first file arrived; sorted instead.
    const byField = files as Record<string, unknown>;
    for (const field of Object.keys(byField).sort()) uploads.push(...[byField[field] ?? []].flat());
  }
  if (uploads.length === 0) return req.body as unknown;
  return { fields: req.body as unknown, files: uploads.map(uploadFacts) };
}

// What identifies a file: its field, name, type and size, and its bytes' SHA-256 when they are in memory
// (multer's memory storage). Disk storage leaves only the path, random per request: not part of it.
function uploadFacts(file: UploadedFile) {
  return {
    field: file.fieldname,
    name: file.originalname,
    type: file.mimetype,
    size: file.size,
    sha256:
      file.buffer instanceof Uint8Array
        ? createHash('sha256').update(file.buffer).digest('hex')
        : undefined,
  };
}

export type { TransactionalAnswer } from '../http/transactional-answer.js';
export type {
  TransactionalRouteHandler,
  TransactionalRouteOptions,
} from './transactional-route.js';

export { transactionalRoute } from './transactional-route.js';
