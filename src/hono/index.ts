/**
 * `idempotency-kit/hono`: `Idempotency-Key` middleware for Hono 4. The handler can read the execution's
 * context with `c.get('idempotency')` or `currentIdempotency()`.
 *
 * Thin by design: the shared HTTP module decides; this file reads `c.req` and captures `c.res`.
 * @module
 */
import type { Context, MiddlewareHandler } from 'hono';
import type { StatusCode } from 'hono/utils/http-status';
import { withAuthority } from '../http/host-header.js';
import {
  captureWebResponse,
  type Decision,
  decide,
  type EngineSource,
  exposedLayerHeaders,
  type HttpResponseData,
  type HttpRouteOptions,
  type IdempotencyContext,
  type RequestFacts,
  resolveEngine,
  resolvePolicy,
  routeOptionsOf,
} from '../http/index.js';
import { checkAdapterOptions, scopeFunctionOption } from '../http/options.js';
import { announcedBody, readBodyUpTo, tooLargeDecision, webBody } from '../http/web.js';
import { setAsideEarlierResponse } from './earlier-response.js';
import { watchAnswer } from './handler-answer.js';
import { keepDroppedAnswer } from './outer-answer.js';
import { isUnseenBody, unseenBodyError } from './unseen-body.js';

export type { IdempotencyContext } from '../http/index.js';
export { currentIdempotency } from '../http/index.js';

declare module 'hono' {
  interface ContextVariableMap {
    /**
     * The idempotency context while the handler runs under a claim, else `undefined`: a request without a
     * key on a `key: 'optional'` route (the default), a method the layer does not cover, a route without
     * the middleware. Read it with `?.`, as Fastify's `request.idempotency`.
     */
    idempotency: IdempotencyContext | undefined;
  }
}

/** Options of {@link idempotency}: the route policy, the scope, and the engine (or its options). */
export type HonoIdempotencyOptions = HttpRouteOptions &
  EngineSource & {
    /**
     * Who is calling: records are never shared across scopes. Mount the middleware after authentication.
     * @default a digest of the Authorization and Cookie headers (only the cookies `scopeCookies`
     *   names, when set) and of the headers `scopeHeaders` names: credentials in any other header (an API
     *   key) put every caller in one scope unless they are named there or a scope function is given; also
     *   when the function gives (or resolves to) `undefined`, `null`, `''` or only whitespace
     */
    scope?: (c: Context) => string | Promise<string>;
  };

/** The middleware, with `route()` to derive a middleware with different per-route options. */
export interface HonoIdempotency extends MiddlewareHandler {
  /** A middleware for one route, overriding some options (same engine). */
  route(options: HttpRouteOptions): MiddlewareHandler;
}

function facts(
  c: Context,
  scope: ((c: Context) => string | Promise<string>) | undefined,
  bodyLimit: number | false,
): RequestFacts {
  const url = new URL(c.req.url);
  return {
    method: c.req.method,
    path: url.pathname,
    query: url.search,
    // HTTP/2 through @hono/node-server carries no `host` header: the URL's host is the `:authority`.
    header: (name) => withAuthority(name, c.req.header(name), () => url.host || undefined),
    body: () => bodyOf(c, bodyLimit),
    scope: () => scope?.(c),
  };
}

/**
 * The body for the fingerprint, left in Hono's cache, so the handler (or a validator) can still read it in
 * any form. One a middleware before the layer read (a validator) is taken from the cache as it is, within
 * that reader's limit; otherwise at most `bodyLimit` bytes are read (see `../http/web.ts`), or none
 * (`false`). With a Content-Length, through `c.req.arrayBuffer()`: on @hono/node-server that reads the
 * socket directly, whereas `c.req.raw.body` would build a whole fetch Request and its stream (so an absent
 * body is not checked for first: it reads as zero bytes, which fingerprints the same); without one (a
 * chunked body), through that stream. A body read from `c.req.raw` before the layer, which Hono's cache
 * does not hold, is refused (`./unseen-body.ts`).
 * @throws (rejects with) InvalidOptionsError for that body; RequestTooLargeError past `bodyLimit`.
 */
function bodyOf(c: Context, bodyLimit: number | false): Promise<unknown> | undefined {
  const cache = c.req.bodyCache as Record<string, Promise<unknown> | undefined>;
  const cached = firstKey(cache);
  if (cached === 'formData') return formEntries(cache.formData as Promise<FormData>);
  if (cached !== undefined) return c.req.arrayBuffer().then((buffer) => new Uint8Array(buffer));
  if (bodyLimit === false) return undefined;
  // Read from `c.req.raw` before the layer, and kept nowhere: refused, nothing claimed (`./unseen-body.ts`).
  if (isUnseenBody(c)) return Promise.reject(unseenBodyError(c));
  const announced = announcedBody(c.req.header('content-length'), bodyLimit, () =>
    c.req.arrayBuffer(),
  );
  if (announced !== undefined) return announced.then((bytes) => rawWithBody(c, bytes));
  return readBodyUpTo(c.req.raw.body, bodyLimit).then((bytes) => {
    // Read from the stream (no Content-Length): the body is gone from the request, so the handler reads
    // these bytes from the cache instead.
    cache.arrayBuffer = Promise.resolve(ownBuffer(bytes));
    return rawWithBody(c, bytes);
  });
}

/**
 * Give `c.req.raw` back the body the layer read: a handler that reads the raw request
 * (`c.req.raw.text()`, `c.req.raw.formData()`, its stream, or hands it on to a fetch-style handler: tRPC's,
 * an auth library's) found it used, and answered 500 ("Body is unusable"), or, reading a chunked body's
 * stream, got no bytes at all and ran, and was stored, on an empty body. Its body members are answered by
 * a Request made from these bytes, as `hono/body-limit` makes one once it has read a body, but only when
 * one of them is used: made for every request, it added about a third to the CPU time of a small keyed
 * request on `@hono/node-server` (measured locally), which builds a fetch Request only when one is
 * needed. The request itself stays (its headers, URL and `signal`, which the new Request follows too).
 * Not for GET or HEAD, which a Request cannot give a body.
 */
function rawWithBody(c: Context, bytes: Uint8Array): Uint8Array {
  const raw = c.req.raw;
  if (raw.method === 'GET' || raw.method === 'HEAD') return bytes;
  let made: Request | undefined;
  const request = () => {
    made ??= requestWithBody(raw, bytes);
    return made;
  };
  Object.defineProperty(raw, 'body', { configurable: true, get: () => request().body });
  // Reading whether it was used does not make one: it was not, until a member below was called.
  Object.defineProperty(raw, 'bodyUsed', {
    configurable: true,
    get: () => made?.bodyUsed ?? false,
  });
  for (const name of BODY_METHODS) {
    // One the runtime's Request lacks (`bytes` before Node 22) stays missing, as without the layer.
    if (!(name in raw)) continue;
    Object.defineProperty(raw, name, {
      configurable: true,
      writable: true,
      value: (...args: unknown[]) =>
        (request() as unknown as Record<string, (...args: unknown[]) => unknown>)[name]!.apply(
          request(),
          args,
        ),
    });
  }
  return bytes;
}

/**
 * A Request like `raw`, with `bytes` as its body. `new Request(raw, …)` is refused when `raw` is not one
 * of the runtime's own Requests: @hono/node-server's with `overrideGlobalObjects: false`, whose internals
 * undici cannot read ("Cannot read properties of undefined (reading 'window')"), so every read of
 * `c.req.raw` answered 500 there. Such a request is rebuilt from its URL, method, headers and `signal`.
 */
function requestWithBody(raw: Request, bytes: Uint8Array): Request {
  const body = bytes as Uint8Array<ArrayBuffer>;
  try {
    return new Request(raw, { body });
  } catch {
    return new Request(raw.url, {
      method: raw.method,
      headers: raw.headers,
      signal: raw.signal,
      body,
    });
  }
}

// The members of a fetch Request that read its body (`clone` copies it).
const BODY_METHODS = ['arrayBuffer', 'blob', 'bytes', 'formData', 'json', 'text', 'clone'] as const;

// The form of the body Hono cached first, which it converts the others from (no array built, as
// `Object.keys` would).
function firstKey(cache: object): string | undefined {
  for (const key in cache) return key;
  return undefined;
}

/**
 * A form a middleware before the layer read with `c.req.formData()`, as the fingerprint covers it: its
 * entries in order, each file by name, type and bytes. Not its bytes: Hono makes them from the form with
 * `new Response(formData)`, which encodes it as multipart with a new random boundary each time (an
 * urlencoded form too), so every retry would be a 422.
 */
async function formEntries(form: Promise<FormData>): Promise<unknown> {
  const entries: unknown[] = [];
  for (const [name, value] of await form) {
    entries.push(
      typeof value === 'string'
        ? [name, value]
        : [
            name,
            {
              file: value.name,
              type: value.type,
              bytes: new Uint8Array(await value.arrayBuffer()),
            },
          ],
    );
  }
  return { form: entries };
}

// The bytes as an ArrayBuffer of their own, as `Request.arrayBuffer()` gives them: a chunk or a
// concatenation may be a view of a larger (pooled) buffer.
function ownBuffer(bytes: Uint8Array): ArrayBuffer {
  const { buffer, byteOffset, byteLength } = bytes;
  return byteOffset === 0 && byteLength === buffer.byteLength
    ? (buffer as ArrayBuffer)
    : (buffer.slice(byteOffset, byteOffset + byteLength) as ArrayBuffer);
}

const decoder = new TextDecoder();

// Hono converts one cached body form into another through `new Response(…)`, which is slow. The handler
// most often reads the body as JSON or text: derive the text from the bytes the layer already read, lazily
// and exactly as `Request.text()` decodes them (UTF-8, a BOM removed, invalid bytes replaced).
function cacheText(c: Context): void {
  // Typed as the bodies, but Hono keeps the promises of them.
  const cache = c.req.bodyCache as Record<string, Promise<unknown> | undefined>;
  const bytes = cache.arrayBuffer as Promise<ArrayBuffer> | undefined;
  if (bytes === undefined || cache.text !== undefined) return;
  let text: Promise<string> | undefined;
  Object.defineProperty(cache, 'text', {
    configurable: true,
    enumerable: true,
    get: () => {
      text ??= bytes.then((buffer) => decoder.decode(buffer));
      return text;
    },
    set: (value: Promise<string>) => {
      Object.defineProperty(cache, 'text', {
        value,
        writable: true,
        enumerable: true,
        configurable: true,
      });
    },
  });
}

/**
 * Name the layer's own headers in the CORS middleware's expose list, on `c.res`: Hono copies the headers
 * set there so far over the returned response's. A `c.res` whose headers are immutable (a `fetch()` result
 * an earlier middleware put there) is left as it is: the answer itself is right either way.
 */
function exposeToBrowser(c: Context, answer: HttpResponseData): void {
  const expose = exposedLayerHeaders(answer, (name) => c.res.headers.get(name));
  if (expose === undefined) return;
  try {
    c.res.headers.set('access-control-expose-headers', expose);
  } catch {
    // Immutable headers (TypeError): nothing to add to.
  }
}

/**
 * The layer's answer (a replay, a problem) as Hono's own responses are made (`c.newResponse`): with the
 * headers a middleware before the layer set with `c.header` (hono/request-id's X-Request-Id), which the
 * handler's `c.json` carried the first time, and the answer's own over them. A bare `Response` returned
 * from a middleware goes out without them.
 */
function answer(c: Context, data: HttpResponseData): Response {
  return c.newResponse(webBody(data), { status: data.status as StatusCode, headers: data.headers });
}

/**
 * Create the middleware. Mount it after authentication and validation, before the handler.
 * @example
 * const idem = idempotency({ store: memoryStore() });
 * app.post('/orders', idem.route({ key: 'required' }), async (c) => c.json(await createOrder(await c.req.json()), 201));
 */
export function idempotency(options: HonoIdempotencyOptions): HonoIdempotency {
  checkAdapterOptions(options, 'idempotency');
  const engine = resolveEngine(options);
  const base = routeOptionsOf(options);
  const scope = scopeFunctionOption(options.scope);

  const create = (route: HttpRouteOptions): MiddlewareHandler => {
    const policy = resolvePolicy(base, route);
    return async (c, next) => {
      let decision: Decision;
      try {
        decision = await decide(engine, policy, facts(c, scope, policy.requestBodyLimit));
      } catch (error) {
        // A body over `requestBodyLimit`: answered 413, nothing run or stored (anything else is rethrown).
        decision = tooLargeDecision(error);
      }
      if (decision.action === 'pass') return next();
      // A `c.res` a middleware before the layer set would have Hono drop what is answered from here on
      // (`./earlier-response.ts`).
      const earlier = setAsideEarlierResponse(c);
      if (decision.action === 'respond') {
        // Only a browser's cross-origin request carries Origin: any other request skips the CORS look-up
        // (reading `c.res` builds a Response when no middleware has).
        if (c.req.header('origin') !== undefined) exposeToBrowser(c, decision.response);
        return answer(c, decision.response);
      }
      const { execution } = decision;
      c.set('idempotency', execution.context);
      cacheText(c);
      // A `Response` the handler returns as it is gets the earlier response's headers a helper's answer
      // gets from `c.header` (`./earlier-response.ts`).
      const handlerAnswer = watchAnswer(c, earlier.carry);
      try {
        await execution.enter(next);
      } catch (error) {
        // Hono hands only `Error`s to onError: anything else thrown (`throw { code: 'declined' }`) comes
        // back out of `next`, and the client gets a 500 (or the runtime's failure). Thrown after the
        // handler answered (a middleware after the layer, a `toJSON` throwing a string), the key is
        // judged by that answer, as for an `Error` (`./handler-answer.ts`); thrown before, no response
        // was produced, so the key is released, as for a thrown error (left alone, the claim would stay
        // in progress while the process lives).
        const given = handlerAnswer.given();
        // A middleware before the layer that catches it sends its own `c.res`, as without the layer.
        earlier.putBack();
        if (given === undefined) await execution.fail(error);
        else await execution.answerLost(given, 500);
        throw error;
      }
      // Nothing produced a response (a handler without a `return`): Hono answers 500 once the middleware
      // returns ("Context is not finalized"), or sends the response a middleware before the layer set. No
      // valid response, so the key is released, as for a thrown error; read now, `c.res` would be Hono's
      // placeholder, an empty 200, or that earlier response, stored and replayed to retries.
      if (!c.finalized) {
        earlier.putBack();
        await execution.fail(
          new Error('The handler returned no response (Hono context not finalized)'),
        );
        return;
      }
      // A middleware before the layer answered (a timeout: `hono/timeout`'s 504) while the handler ran on,
      // and Hono dropped the handler's answer: it is stored, not the timeout's (`./outer-answer.ts`).
      const dropped = handlerAnswer.dropped();
      if (dropped !== undefined) {
        await keepDroppedAnswer(dropped, c.res.status, execution);
        return;
      }
      // A timeout answered while the handler ran on, and the handler then answered with a `Response` it
      // built itself, or nothing: Hono dropped it unseen (`./handler-answer.ts`). The handler ran, its
      // outcome is unknown, so the key keeps the timeout's marker (retries get 409, never a second run);
      // released on the timeout's 5xx, the retry charged a second time. (An error of the handler itself
      // is rendered in the task its chain settles in, and is judged below.)
      if (handlerAnswer.answerUnseen()) {
        await execution.cutOff(c.res.status);
        return;
      }
      // An error after the handler answered (`c.json` that cannot serialize its answer, a middleware
      // after the layer that threw once the handler returned): what went out is not the handler's answer,
      // and the key is judged by that answer (`./handler-answer.ts`).
      const answered = handlerAnswer.lost();
      if (answered !== undefined) {
        await execution.answerLost(answered, c.res.status);
        return;
      }
      // Hono catches the handler's error and renders it through onError. Judged by what it rendered, as
      // Express's error handlers are: a 4xx (an HTTPException(402) for a declined card) is the handler's
      // answer and is stored; a 5xx releases the key unless errors are kept.
      if (c.error !== undefined && !policy.storeServerErrors && c.res.status >= 500) {
        await execution.fail(c.error);
        return;
      }
      const captured = await captureWebResponse(c.res, execution);
      // Assigning `c.res` makes Hono rebuild the response around its body stream: only when it changed.
      if (captured !== c.res) c.res = captured;
    };
  };
  return Object.assign(create({}), { route: create });
}
