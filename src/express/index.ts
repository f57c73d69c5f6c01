/**
 * `idempotency-kit/express`: `Idempotency-Key` middleware for Express 4 and 5.
 *
 * Thin by design: every policy decision is made by the shared HTTP module; this file only reads the
 * request, captures what the handler writes (`res.json`, `res.send`, `res.end`, `res.write` chunks and
 * piped streams all end in `write`/`end`) and writes replays and problems.
 * @module
 */
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import {
  type CapturedResponse,
  createBodyCollector,
  credentialScope,
  decide,
  type EngineSource,
  type Execution,
  type HeaderValue,
  type HttpResponseData,
  type HttpRouteOptions,
  type RequestFacts,
  resolveEngine,
  resolvePolicy,
  routeOptionsOf,
} from '../http/index.js';

export type { IdempotencyContext } from '../http/index.js';
export { currentIdempotency } from '../http/index.js';

// Express types its request through this global namespace.
declare global {
  namespace Express {
    interface Request {
      /** The idempotency context while the handler runs under a claim, else `undefined`. */
      idempotency?: import('../http/index.js').IdempotencyContext;
    }
  }
}

/** Options of {@link idempotency}: the route policy, the scope, and the engine (or its options). */
export type ExpressIdempotencyOptions = HttpRouteOptions &
  EngineSource & {
    /**
     * Who is calling: records are never shared across scopes. Mount the middleware after authentication
     * and return the principal or tenant id. @default a digest of the Authorization and Cookie headers
     */
    scope?: (req: Request) => string | Promise<string>;
  };

/** The middleware, with `route()` to derive a middleware with different per-route options. */
export interface ExpressIdempotency extends RequestHandler {
  /** A middleware for one route, overriding some options (same engine). */
  route(options: HttpRouteOptions): RequestHandler;
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
  const scope =
    options.scope ??
    ((req: Request) => credentialScope(req.headers.authorization, req.headers.cookie));

  const create = (route: HttpRouteOptions): RequestHandler => {
    const policy = resolvePolicy(base, route);
    return (req: Request, res: Response, next: NextFunction) => {
      decide(engine, policy, facts(req, scope)).then((decision) => {
        if (decision.action === 'pass') return next();
        if (decision.action === 'respond') return send(res, decision.response);
        capture(res, decision.execution);
        req.idempotency = decision.execution.context;
        decision.execution.enter(next);
      }, next);
    };
  };
  return Object.assign(create({}), { route: create });
}

function facts(req: Request, scope: (req: Request) => string | Promise<string>): RequestFacts {
  const url = req.originalUrl ?? req.url;
  const q = url.indexOf('?');
  return {
    method: req.method,
    path: q === -1 ? url : url.slice(0, q),
    query: q === -1 ? '' : url.slice(q + 1),
    // Node joins repeated lines of an unknown header with ', ', which the key parser refuses as a list.
    header: (name) => req.headers[name],
    body: () => req.body as unknown,
    scope: () => scope(req),
  };
}

function send(res: Response, data: HttpResponseData): void {
  res.status(data.status);
  const headers = data.headers;
  for (let i = 0; i < headers.length; i++) {
    const [name, value] = headers[i]!;
    if (headers.findIndex((header) => header[0] === name) < i) continue; // set with its first value
    const values = [value];
    for (let j = i + 1; j < headers.length; j++) {
      if (headers[j]![0] === name) values.push(headers[j]![1]);
    }
    res.setHeader(name, values.length === 1 ? value : values);
  }
  const body = data.body;
  // A view, not a copy: nothing writes to stored or problem bodies.
  res.end(
    body.byteLength === 0 ? undefined : Buffer.from(body.buffer, body.byteOffset, body.byteLength),
  );
}

const fromString = (chunk: string, encoding: unknown): Buffer =>
  Buffer.from(chunk, typeof encoding === 'string' ? (encoding as BufferEncoding) : 'utf8');

// Only the headers that may be stored: reading them one by one is cheaper than copying all of them.
function replayedHeaders(
  res: Response,
  allowed: ReadonlySet<string>,
): Array<[string, HeaderValue]> {
  const out: Array<[string, HeaderValue]> = [];
  for (const name of allowed) {
    const value = res.getHeader(name);
    if (value !== undefined) out.push([name, value]);
  }
  return out;
}

// Patch this response's writeHead/write/end. Bytes go out as the handler writes them; only the final
// `end` is held until the outcome is stored, so the client never sees a finished response whose retry
// could still find the key in progress.
function capture(res: Response, execution: Execution): void {
  const collector = createBodyCollector(execution.policy.maxBodyBytes);
  const writeHead = res.writeHead;
  const write = res.write;
  const end = res.end;
  let ended = false;

  res.writeHead = function (this: Response, status: number, a?: unknown, b?: unknown) {
    // Node's own implicit call (`writeHead(statusCode)`) carries no headers: the common case.
    if (a === undefined) return writeHead.call(this, status);
    // Headers passed to writeHead bypass getHeaders(): move them into setHeader so they can be captured.
    const message = typeof a === 'string' ? a : undefined;
    const headers = typeof a === 'string' ? b : a;
    if (Array.isArray(headers)) {
      const flat = headers.flat() as string[];
      for (let i = 0; i + 1 < flat.length; i += 2) res.appendHeader(flat[i]!, flat[i + 1]!);
    } else if (headers !== undefined && headers !== null) {
      for (const [k, v] of Object.entries(headers)) res.setHeader(k, v as string);
    }
    return message === undefined
      ? writeHead.call(this, status)
      : (writeHead as (s: number, m: string) => Response).call(this, status, message);
  } as Response['writeHead'];

  res.write = function (this: Response, chunk: unknown, ...rest: unknown[]) {
    if (!ended) {
      if (typeof chunk === 'string') collector.add(fromString(chunk, rest[0]), true);
      else if (chunk instanceof Uint8Array) collector.add(chunk);
    }
    return (write as (...args: unknown[]) => boolean).call(this, chunk, ...rest);
  } as Response['write'];

  res.end = function (this: Response, ...args: unknown[]) {
    if (ended) return (end as (...a: unknown[]) => Response).apply(this, args);
    ended = true;
    const chunk = args[0];
    if (typeof chunk === 'string') collector.add(fromString(chunk, args[1]), true);
    else if (chunk instanceof Uint8Array) collector.add(chunk);
    const response: CapturedResponse = {
      status: res.statusCode,
      headers: replayedHeaders(res, execution.policy.replayHeaders),
      body: collector.body(),
      bytes: collector.bytes,
    };
    void execution
      .finish(response)
      .then(() => (end as (...a: unknown[]) => Response).apply(this, args));
    return this;
  } as Response['end'];
}
