/**
 * `idempotency-kit/fastify`: a Fastify 5 plugin. Routes opt out or change their policy with
 * `config: { idempotency: { key: 'required' } }` (or `false`).
 *
 * Thin by design: the shared HTTP module decides; this file reads the request in the last `preHandler` of
 * each route it covers (after authentication, body parsing, validation and every other hook, whose replies
 * are never stored) and captures what `reply.send` produced (objects, strings, buffers and streams) in
 * `onSend`: a stream goes out as the handler produces it, and only its end waits for the outcome to be
 * stored (`./relayed-body.ts`).
 * @module
 */
import type { Readable } from 'node:stream';
import type {
  FastifyInstance,
  FastifyPluginCallback,
  FastifyReply,
  FastifyRequest,
  onSendAsyncHookHandler,
  preHandlerHookHandler,
  preParsingHookHandler,
  RouteHandlerMethod,
} from 'fastify';
import fp from 'fastify-plugin';
import { InvalidOptionsError } from '../core/errors.js';
import { keptRawBody } from '../http/fingerprint.js';
import { withAuthority } from '../http/host-header.js';
import {
  type CapturedResponse,
  decide,
  type EngineSource,
  type HttpRouteOptions,
  type IdempotencyContext,
  isJsonContentType,
  keepContentEncoding,
  policyCovers,
  type RequestFacts,
  type RoutePolicy,
  readAllowedHeaders,
  resolveEngine,
  resolvePolicy,
  routeOptionsOf,
} from '../http/index.js';
import { checkAdapterOptions, scopeFunctionOption } from '../http/options.js';
import { BodyRelay } from '../http/stream-relay.js';
import { isRequestTooLargeError, requestTooLargeResponse } from '../http/unread-body.js';
import { readWhole } from '../http/web.js';
import { headOf, restoreHead } from './answer-head.js';
import { errorHandlingState, isHandlerTimeout, UNREADABLE } from './error-handling.js';
import { callWatched, lostAnswer, type Running, watchSends } from './handler-answer.js';
import { jsonTextOf, keepJsonText } from './json-text.js';
import { nodeStreamSource, relayedBody } from './relayed-body.js';
import { requestBody } from './request-body.js';
import { captureHookName, checkRouteOrder } from './route-order.js';
import { sendAnswer } from './send.js';
import { isWebResponse, isWebStream, unwrapWebResponse } from './web-payload.js';

export type { IdempotencyContext } from '../http/index.js';
export { currentIdempotency } from '../http/index.js';
export type { TransactionalAnswer } from '../http/transactional-answer.js';
export type { FastifyTransactionalRouteOptions } from './transactional-route.js';
export { transactionalRoute } from './transactional-route.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** This route's idempotency policy over the plugin's defaults; `false` turns the layer off. */
    idempotency?: HttpRouteOptions | false;
  }
  interface FastifyRequest {
    /** The idempotency context while the handler runs under a claim, else `undefined`. */
    idempotency?: IdempotencyContext;
  }
}

/** Options of the plugin: the default route policy, the scope, and the engine (or its options). */
export type FastifyIdempotencyOptions = HttpRouteOptions &
  EngineSource & {
    /**
     * Who is calling: records are never shared across scopes.
     * @default a digest of the Authorization and Cookie headers (only the cookies `scopeCookies`
     *   names, when set) and of the headers `scopeHeaders` names: credentials in any other header (an API
     *   key) put every caller in one scope unless they are named there or a scope function is given; also
     *   when the function gives (or resolves to) `undefined`, `null`, `''` or only whitespace
     */
    scope?: (request: FastifyRequest) => string | Promise<string>;
    /**
     * Keep the JSON text of each request the layer fingerprints (a `preParsing` hook copies the body as
     * Fastify reads it), so that numbers a double cannot hold, such as int64 ids, are compared exactly:
     * Fastify's parser rounds `9223372036854775807` and `9223372036854775806` to one value, and a key
     * reused for the other id would be replayed instead of refused with 422. Off by default: the copy
     * costs some 4–17 µs of CPU per such request (bench/http-cpu.ts), up to a third of the layer's cost, for
     * bodies most APIs never send. A `request.rawBody` the app keeps is used either way.
     * @default false
     */
    keepJsonText?: boolean;
  };

/**
 * The request as the HTTP layer sees it. A class rather than an object of closures: one allocation per
 * request instead of four.
 */
class FastifyFacts implements RequestFacts {
  readonly method: string;
  readonly path: string;
  readonly query: string;

  constructor(
    private readonly request: FastifyRequest,
    private readonly scopeOf: FastifyIdempotencyOptions['scope'],
    private readonly bodyLimit: number | false,
  ) {
    const url = request.raw.url ?? request.url;
    const q = url.indexOf('?');
    this.method = request.method;
    this.path = q === -1 ? url : url.slice(0, q);
    this.query = q === -1 ? '' : url.slice(q + 1);
  }

  // Node joins repeated lines of an unknown header with ', ', which the key parser refuses as a list.
  // On HTTP/2 the host is the `:authority` pseudo-header, and there is no `host`.
  header(name: string): string | readonly string[] | undefined {
    const { headers } = this.request;
    return withAuthority(name, headers[name], () => headers[':authority']);
  }

  // What the parser made of the body, or the bytes the plugin reads itself (`./request-body.ts`).
  body(): unknown {
    return requestBody(this.request, this.bodyLimit);
  }

  // The JSON text lets the fingerprint see numbers exactly: a `rawBody` the app kept (fastify-raw-body, a
  // content-type parser), else the one the plugin kept.
  rawBody(): Uint8Array | string | undefined {
    return keptRawBody(this.request) ?? jsonTextOf(this.request);
  }

  scope(): string | Promise<string> | undefined {
    return this.scopeOf?.(this.request);
  }
}

// A Node stream, or a web ReadableStream (async iterable too).
const isStream = (payload: unknown): payload is AsyncIterable<Uint8Array | string> =>
  (typeof payload === 'object' &&
    payload !== null &&
    typeof (payload as Readable).pipe === 'function') ||
  isWebStream(payload);

// Hand the sent payload to the execution; returns the payload to send on (re-created for streams).
async function capturePayload(reply: FastifyReply, running: Running, sent: unknown) {
  const { execution } = running;
  let payload = sent;
  if (isWebResponse(payload)) {
    try {
      payload = unwrapWebResponse(reply, payload);
    } catch (error) {
      // Nothing valid can be sent: release the key, as for a thrown error, and let Fastify answer it.
      await execution.fail(error);
      throw error;
    }
    // No body: the payload sent on is `null`, not `undefined` (which an onSend hook returns to keep the
    // `Response` as it was, whose headers Fastify would then apply a second time).
  }
  const status = reply.statusCode;
  running.captured = headOf(reply);
  const headers = readAllowedHeaders(execution.policy.replayHeaders, (name) =>
    reply.getHeader(name),
  );
  // Set by now only if the payload is encoded already (an onSend hook that compressed it ran first).
  keepContentEncoding(headers, reply.getHeader('content-encoding'));
  // A thrown error is judged by the reply Fastify's error handler made of it, as Express's error handlers
  // are: a 4xx (an error with `statusCode` 402, a declined card) is the handler's answer and is stored; a
  // 5xx releases the key unless errors are kept.
  const finish = (response: CapturedResponse) =>
    running.error === undefined || execution.policy.storeServerErrors || status < 500
      ? execution.finish(response)
      : execution.fail(running.error);
  if (!isStream(payload)) {
    const body =
      payload === undefined || payload === null
        ? new Uint8Array(0)
        : typeof payload === 'string'
          ? Buffer.from(payload, 'utf8')
          : (payload as Uint8Array);
    const limit = execution.policy.maxBodyBytes;
    const kept = body.byteLength <= limit ? body : undefined;
    await finish({ status, headers, body: kept, bytes: body.byteLength });
    return payload;
  }
  const response = { status, headers };
  if (!isWebStream(payload)) {
    return relayedBody(
      new BodyRelay(execution, response, nodeStreamSource(payload), [], headSent(reply)),
      reply.raw,
    );
  }
  // A web stream (a `Response`'s body): one made from bytes has them all at hand, and keeps the path of
  // any body given whole (stored, then sent with its Content-Length).
  let whole: Awaited<ReturnType<typeof readWhole>>;
  try {
    whole = await readWhole(payload.getReader(), execution.policy.maxBodyBytes);
  } catch (error) {
    // The stream failed at once, before anything of it went out, and Fastify answers the error in its
    // place: released, as for a thrown error (a stream failing later is judged by the handler's status,
    // `../http/stream-relay.ts`). Left alone, the claim would stay in progress, its lease extended while
    // the process lives.
    await execution.fail(error);
    throw error;
  }
  if (whole instanceof Uint8Array) {
    await finish({ status, headers, body: whole, bytes: whole.byteLength });
    return Buffer.from(whole.buffer, whole.byteOffset, whole.byteLength);
  }
  return relayedBody(
    new BodyRelay(execution, response, whole.source, whole.head, headSent(reply)),
    reply.raw,
  );
}

/**
 * Whether the reply's head went out, for a relayed body that fails: after it, the client saw the
 * handler's status, and the key is judged by it; before it, Fastify's error reply goes out in its place,
 * and the key is released (`../http/stream-relay.ts`).
 */
function headSent(reply: FastifyReply): () => boolean {
  return () => reply.raw.headersSent;
}

// The plugin's own option, and those Fastify reads from any plugin's options (`register(plugin, { prefix })`).
const PLUGIN_OWN_OPTIONS = ['keepJsonText', 'prefix', 'logLevel', 'logSerializers'];

// An option that fails its check goes to `done`, so that `register` (or `ready`) rejects with it: thrown
// from a callback plugin, it would escape as an uncaught exception and the plugin would time out.
const plugin: FastifyPluginCallback<FastifyIdempotencyOptions> = (fastify, options, done) => {
  try {
    install(fastify, options);
  } catch (error) {
    done(error as Error);
    return;
  }
  done();
};

// Set on the instance the plugin's hooks go to. Fastify makes an encapsulated scope from its parent with
// `Object.create`, so a child sees its ancestors' mark and a sibling does not.
const REGISTERED = Symbol.for('idempotency-kit.fastify-registered');

// The options checked and resolved once, and the hooks that apply them.
function install(fastify: FastifyInstance, options: FastifyIdempotencyOptions): void {
  checkAdapterOptions(options, 'idempotencyPlugin', PLUGIN_OWN_OPTIONS);
  // Registered in an enclosing scope too, both layers would claim each request of this one: the inner
  // claim meets the outer's, so every request was answered 409 in_progress and no handler ever ran.
  if ((fastify as unknown as Record<symbol, unknown>)[REGISTERED] === true) {
    throw new InvalidOptionsError(
      'idempotencyPlugin: already registered in this scope or an enclosing one, whose hooks reach these ' +
        'routes too (each request would be claimed twice and answered 409). Register it once per scope ' +
        "tree, in sibling scopes for different options, or set a route's own in config.idempotency",
    );
  }
  (fastify as unknown as Record<symbol, unknown>)[REGISTERED] = true;
  const engine = resolveEngine(options);
  const base = routeOptionsOf(options);
  const defaults = resolvePolicy(base);
  const scope = scopeFunctionOption(options.scope);
  const policies = new WeakMap<HttpRouteOptions, RoutePolicy>();
  const running = new WeakMap<FastifyRequest, Running>();
  // The same, kept after the capture took its request out of `running`: an error after it (an `onSend`
  // hook after the plugin's, the capture failing) lets the error handler's page through `watchSends`.
  const watched = new WeakMap<FastifyRequest, Running>();
  // Requests answered after the claim before their handler was called (noted as the reply is sent, by
  // `watchSends`, and again in `capture`): it must never run.
  const answeredFirst = new WeakSet<FastifyRequest>();
  const markAnsweredFirst = (request: FastifyRequest) => {
    answeredFirst.add(request);
  };
  // `METHOD url` of each route `onRoute` saw, with how many times (one per constraint variant).
  const seen = new Map<string, number>();

  const policyOf = (route: HttpRouteOptions | false | undefined): RoutePolicy => {
    if (route === undefined) return defaults;
    if (route === false) return { ...defaults, key: 'off' };
    let policy = policies.get(route);
    if (policy === undefined) {
      policy = resolvePolicy(base, route);
      policies.set(route, policy);
    }
    return policy;
  };

  // Declared up front, as Fastify asks: every request then has the property from its construction, with
  // one shape, instead of gaining it halfway through (a hidden-class change on every request).
  if (!fastify.hasRequestDecorator('idempotency'))
    fastify.decorateRequest('idempotency', undefined);

  // Copies the JSON text of a request the layer will fingerprint, with a JSON body and no text kept by the
  // app (`keepJsonText`).
  const keepTextOf =
    (policy: RoutePolicy): preParsingHookHandler =>
    (request, _reply, payload, next) => {
      const copy =
        request.headers[policy.headerName] !== undefined &&
        isJsonContentType(request.headers['content-type']) &&
        keptRawBody(request) === undefined;
      next(null, copy ? keepJsonText(request, payload) : payload);
    };

  // The route's handler, noting that it was called. A plugin registered after this one may add a
  // preHandler to the route in its own onRoute hook (@fastify/rate-limit with `hook: 'preHandler'`), which
  // Fastify then runs after the claim: its reply (a 429, a thrown 401) is no answer of the handler's, and
  // was stored and replayed to every retry of the key. Returns what the handler returns, untouched.
  const markStart = (handler: RouteHandlerMethod): RouteHandlerMethod =>
    function (this: FastifyInstance, request, reply) {
      // A hook answered first, and its key was released: not run. Fastify goes on to the handler when an
      // async hook sent without `return reply` while an async onSend (the capture) still runs, since
      // `reply.sent` is false until the response ended: the charge then ran with its key free, and the
      // retry ran it again.
      if (answeredFirst.has(request)) return undefined;
      const current = running.get(request);
      if (current === undefined) return handler.call(this, request, reply);
      return callWatched(handler, this, request, reply, current);
    };

  // Callback style on purpose: the handler runs inside `done()`, so it inherits the context.
  const claim: preHandlerHookHandler = (request, reply, next) => {
    const policy = policyOf(request.routeOptions.config?.idempotency);
    const facts = new FastifyFacts(request, scope, policy.requestBodyLimit);
    decide(engine, policy, facts).then(
      (decision) => {
        if (decision.action === 'pass') return next();
        if (decision.action === 'respond') {
          void sendAnswer(request, reply, decision.response);
          return;
        }
        // Answered while the claim was in flight (`handlerTimeout` passing during a slow claim): Fastify
        // runs no hook nor the handler after a reply that ended, so nothing would settle the claim, held in
        // progress until maxExecution (every retry answered 409 in_progress). Nothing ran: released.
        if (reply.sent) {
          void decision.execution.fail(
            new Error('The request was answered before its claim was made'),
          );
          return;
        }
        const current: Running = { execution: decision.execution };
        running.set(request, current);
        watched.set(request, current);
        watchSends(reply, current, markAnsweredFirst);
        request.idempotency = decision.execution.context;
        decision.execution.enter(next);
      },
      (error: unknown) => {
        // A body over `requestBodyLimit`, which the layer would have to read to fingerprint: nothing ran.
        if (!isRequestTooLargeError(error)) return next(error as Error);
        void sendAnswer(request, reply, requestTooLargeResponse(error.limit));
      },
    );
  };

  // Only the routes the layer covers get its hooks, so a route without a covered method pays nothing:
  // - the claim, as the last preHandler, right before the handler: every hook that may answer first
  //   (authentication, rate limits, the route's own `preHandler` option, which Fastify runs after all
  //   instance hooks) has run, so what it answers is never stored;
  // - with `keepJsonText`, the text copy, appended after the route's own preParsing hooks: a hook that
  //   decodes the body (gzip) runs first.
  fastify.addHook('onRoute', (route) => {
    const policy = policyOf(route.config?.idempotency);
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    for (const method of methods) {
      const name = `${method.toUpperCase()} ${route.url}`;
      seen.set(name, (seen.get(name) ?? 0) + 1);
    }
    if (!methods.some((method) => policyCovers(policy, method))) return;
    route.preHandler = [route.preHandler ?? [], claim].flat();
    route.handler = markStart(route.handler);
    if (options.keepJsonText === true) {
      route.preParsing = [route.preParsing ?? [], keepTextOf(policy)].flat();
    }
  });

  fastify.addHook('onError', (request, _reply, error, next) => {
    const current = watched.get(request);
    if (current !== undefined) current.error = error;
    next();
  });

  // Named for this registration: `printRoutes` lists it on the routes in its scope (`./route-order.ts`).
  const captureName = captureHookName();
  const capture: onSendAsyncHookHandler = async (request, reply, payload) => {
    const current = running.get(request);
    if (current === undefined) return payload;
    running.delete(request);
    // Answered after the claim before the handler was called (a hook's reply, or `handlerTimeout` passing
    // in a slow hook): nothing ran, and `markStart` will not run it now, so the key is released. Checked
    // first: a timeout's marker kept for a handler that never ran answered every retry 409 for good.
    if (current.started !== true) {
      answeredFirst.add(request);
      await current.execution.fail(current.error);
      return payload;
    }
    // Fastify's `handlerTimeout` answered while the handler still runs (it only aborts `request.signal`):
    // not the handler's outcome. Released, a retry ran the handler beside the first (a second charge): a
    // marker is kept instead (`cutOff`), so every retry is answered `response_not_captured`, whatever the
    // handler goes on to do. Its answer while the marker is written is dropped (`timedOut`), and the
    // timeout's reply goes out with its own head, whatever the handler set on the reply meanwhile: the
    // client got the handler's 201 ahead of it, while its retries were told of the timeout. An answer of
    // the handler's that goes out before that reply (an async error handler still at work on it) clears
    // the timeout (`overtaken`): it is the key's outcome, judged below as any answer or throw, except that
    // nothing releases the key after a timeout (`./after-timeout.ts`): a 5xx keeps the marker. The reply
    // of Fastify's error handling for the timeout comes on its stand-in (`timeoutReply`), and is the
    // timeout's whatever the handler did since.
    if (isHandlerTimeout(current.error) || reply === current.timeoutReply) {
      const state = errorHandlingState(reply);
      if (state !== UNREADABLE) current.timedOut = { errorHandling: state };
      const head = headOf(reply);
      await current.execution.cutOff(head.status);
      restoreHead(reply, head);
      return payload;
    }
    // An error after the handler answered (a serializer, a hook before this one): the charge happened,
    // and this is the error's reply, not its answer (`./handler-answer.ts`).
    const answered = lostAnswer(current);
    if (answered !== undefined) {
      await current.execution.answerLost(answered, reply.statusCode);
      return payload;
    }
    const sent = await capturePayload(reply, current, payload);
    // The answer goes out with the head it was stored with (`./answer-head.ts`). An `onSend` hook after
    // this one sees and may change it; what the handler changes while such a hook awaits goes out.
    if (current.captured !== undefined) restoreHead(reply, current.captured);
    return sent;
  };
  fastify.addHook('onSend', Object.defineProperty(capture, 'name', { value: captureName }));

  // A route declared before the plugin runs unprotected, whatever its config asks: refused at start-up.
  fastify.addHook('onReady', function checkOrder(done) {
    try {
      checkRouteOrder(fastify, defaults.key === 'off' ? [] : defaults.methods, seen, captureName);
    } catch (error) {
      done(error as Error);
      return;
    }
    done();
  });

  // A response that finished without passing onSend was written by the app on `reply.raw` after
  // `reply.hijack()`: its bytes are unknown. Keep a marker (retries get 409 response_not_captured, never
  // a second run) rather than a claim in progress for as long as the process lives. Only when it was
  // ended: on HTTP/2, Node's compatibility layer emits `finish` (and Fastify runs onResponse) whenever the
  // stream closes, also when the client cancelled it (RST_STREAM) while the handler runs; that handler's
  // reply still comes through onSend and is stored, as on HTTP/1.1 for a client that went away.
  fastify.addHook('onResponse', (request, reply, next) => {
    const current = running.get(request);
    if (current !== undefined && reply.raw.writableEnded) {
      running.delete(request);
      // Fastify's last-resort reply to an error after the handler's answer (an onSend hook before this
      // one threw on it, then on the error's reply too) also ends here: judged by that answer, as in
      // `capture`.
      const answered = lostAnswer(current);
      if (current.started !== true)
        void current.execution.fail(current.error); // a hook's: never ran
      else if (answered !== undefined)
        void current.execution.answerLost(answered, reply.raw.statusCode);
      // An error handler that hijacked the `handlerTimeout`'s reply and wrote its page on `reply.raw`:
      // the handler runs on, as in `capture`. Released as a 5xx, the retry ran it beside the first.
      else if (isHandlerTimeout(current.error)) void current.execution.cutOff(reply.raw.statusCode);
      else void current.execution.uncaptured(reply.raw.statusCode);
    }
    next();
  });
}

/**
 * The plugin. Register it before the routes it protects (it joins each route as it is declared); every
 * hook (`onRequest`, `preValidation`, `preHandler`s, the route's own) runs before it, and their replies
 * are never stored.
 * @example
 * await app.register(idempotencyPlugin, { store: postgresStore({ pool }), key: 'required' });
 * app.post('/orders', async (req, reply) => reply.code(201).send(await createOrder(req.body)));
 * app.post('/ping', { config: { idempotency: false } }, async () => ({ ok: true }));
 */
export const idempotencyPlugin = fp(plugin, { name: 'idempotency-kit', fastify: '5.x' });
