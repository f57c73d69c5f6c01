/**
 * The HTTP policy in one place: decide from a request whether the layer applies, answer invalid keys,
 * replays, conflicts, mismatches and store outages, and, when the handler must run, hold the claim until
 * the adapter hands back the captured response, then store it or release the key.
 *
 * Adapters only translate: request facts in, {@link Decision} out, captured response back.
 * @module
 */
import type { Idempotency, RunContext, RunOutcome, RunRequest } from '../core/engine.js';
import { isInvalidKeyError, isReplayedError, isStoreUnavailableError } from '../core/errors.js';
import { SCOPE_SOURCE, type ScopeSourced } from '../core/reserved-scopes.js';
import { isThenable } from '../core/thenable.js';
import { type IdempotencyContext, runWithContext } from './context.js';
import { isCorsPreflight } from './cors.js';
import { httpFingerprint } from './fingerprint.js';
import { type HeaderValue, pickHeaders, REPLAYED_HEADER } from './headers.js';
import { parseKeyHeader } from './key-header.js';
import { policyCovers, type RoutePolicy } from './options.js';
import { type HttpResponseData, problemResponse } from './problem.js';
import { replayForClient } from './replay-encoding.js';
import { type HttpOutcome, httpResponseCodec, type NotCapturedMarker } from './response-codec.js';
import { credentialScope, HTTP_SCOPE_SOURCE, isNoScope, warnUnscopedCredentials } from './scope.js';
import { stringBodyKind } from './string-body.js';

/** What the layer needs to know about a request. */
export interface RequestFacts {
  /** Request method. */
  method: string;
  /** Path without the query. */
  path: string;
  /** Raw query string. */
  query: string;
  /** Reads a request header (lower-case name); several lines of one header as an array. */
  header(name: string): string | readonly string[] | undefined;
  /** The body as the fingerprint should see it (bytes, string or parsed value); read only when needed. */
  body(): unknown;
  /**
   * The body's bytes as received, when the app kept them beside the parsed body (a `rawBody` property,
   * as `express.json`'s `verify` or `fastify-raw-body` set it); the fingerprint prefers them for JSON.
   */
  rawBody?(): Uint8Array | string | undefined;
  /**
   * The scope (tenant, principal) from the adapter's `scope` function; computed only when the layer
   * applies. `undefined` when there is none: the layer then digests the request's credentials
   * ({@link credentialScope}, with the route's `scopeCookies`), as it does when the function gives (or
   * its promise resolves to) `undefined`, `null`, `''` or only whitespace ({@link isNoScope}).
   */
  scope(): string | Promise<string | undefined | null> | undefined;
}

/** A response the handler produced, as the adapter captured it. */
export interface CapturedResponse {
  /** Final status. */
  status: number;
  /** Response headers, as the framework holds them. */
  headers: Iterable<readonly [string, HeaderValue]>;
  /** The body bytes, or `undefined` when they exceeded `maxBodyBytes` (no longer buffered). */
  body: Uint8Array | undefined;
  /** Body size in bytes (at least `maxBodyBytes + 1` when `body` is undefined). */
  bytes: number;
}

/** A running execution: the handler runs, then the adapter calls `finish` or `fail` exactly once. */
export interface Execution {
  /** The context `currentIdempotency()` returns inside the handler. */
  readonly context: IdempotencyContext;
  /** The route's policy (the adapter needs `maxBodyBytes`). */
  readonly policy: RoutePolicy;
  /** Run `fn` with this execution's context as `currentIdempotency()` (when `asyncContext` is on). */
  enter<T>(fn: () => T): T;
  /** The response is complete: store it (or release, per policy). Resolves when done; never rejects. */
  finish(response: CapturedResponse): Promise<void>;
  /** The handler failed: release the key (or store `response`, per policy). Never rejects. */
  fail(error: unknown, response?: CapturedResponse): Promise<void>;
  /**
   * A response with this status was sent without the adapter seeing its bytes: keep a marker so that a
   * retry is answered `response_not_captured` and never runs again (a 5xx releases the key, as `finish`
   * would). Does nothing once `finish` or `fail` was called. Never rejects.
   */
  uncaptured(status: number): Promise<void>;
  /**
   * The framework answered `status` itself while the handler may still be running (Fastify's
   * `handlerTimeout`, which only aborts `request.signal`): keep the marker `uncaptured` keeps, whatever the
   * status, so that a retry is answered `response_not_captured` and never runs again. Released, as a 5xx
   * is, a retry ran the handler beside the first (a second charge); left in progress, the key waited for
   * `maxExecution` (held for the process's life without one) and was then taken over and run again.
   * The marker says a timeout answered (`timedOut`), and the retries' `detail` says so: the handler's
   * outcome is unknown, not lost on its way out. Does nothing once `finish` or `fail` was called. Never
   * rejects.
   */
  cutOff(status: number): Promise<void>;
  /**
   * The handler answered with status `answered`, then producing that answer failed (a serializer that
   * cannot write its object, a hook between the handler and the capture that threw), and the framework
   * sent `sent` (its error reply) instead. The handler's work is done, so the key is judged by the answer
   * it gave, not by the error: an answer that would have been stored keeps a `response_not_captured` marker
   * (retries are answered `response_not_captured`, never run again; released like a thrown error, a
   * retry charged a second time), and one that would have released the key (a 5xx) releases it.
   * Does nothing once `finish` or `fail` was called. Never rejects.
   */
  answerLost(answered: number, sent: number): Promise<void>;
  /**
   * The handler answered `status` with a body stream, and the stream failed before its end (`error`): the
   * client got the head and a cut body. The handler's work is done, so the key is judged by the answer, as
   * in `answerLost`: a status that would have been stored keeps a `not_captured` marker (retries are
   * answered `response_not_captured`, never run again; released, a retry charged a second time), and one
   * that releases the key (a 5xx) releases it. Does nothing once `finish` or `fail` was called. Never
   * rejects.
   */
  bodyFailed(status: number, error: unknown): Promise<void>;
}

/** What the adapter does with a request. */
export type Decision =
  /** The layer does not apply: run the handler as if it were not there. */
  | { action: 'pass' }
  /** Answer with this response (a replay or a problem); do not run the handler. */
  | { action: 'respond'; response: HttpResponseData }
  /** Run the handler under the claim and report its response. */
  | { action: 'execute'; execution: Execution };

// Rejection used to make the engine release the claim; never seen outside this module.
class ReleaseClaim {
  constructor(readonly error: unknown) {}
}

/** Turn a stored outcome into its replay. */
export function replayResponse(outcome: HttpOutcome): HttpResponseData {
  if (outcome.kind === 'too_large') {
    return problemResponse('response_too_large', {
      detail: `The first response (status ${outcome.status}) exceeded the size kept for replay; it was sent once and will not be repeated. Use a new key for a new request.`,
    });
  }
  if (outcome.kind === 'not_captured' && outcome.cut === true) {
    return problemResponse('response_not_captured', {
      detail: `The first request was answered (status ${outcome.status}) with a body stream that failed before its end, so the response could not be kept; the handler ran, and it will not be run again. Use a new key for a new request.`,
    });
  }
  if (outcome.kind === 'not_captured' && outcome.timedOut === true) {
    return problemResponse('response_not_captured', {
      detail: `The first request was answered by a timeout (status ${outcome.status}) while its handler ran on, so the handler's own response could not be kept and its outcome is unknown; it will not be run again for this key. Check whether the operation took effect before sending it again with a new key.`,
    });
  }
  if (outcome.kind === 'not_captured') {
    return problemResponse('response_not_captured', {
      detail: `The first response (status ${outcome.status}) was sent without passing through the idempotency layer's capture, so it could not be kept; it will not be repeated. Use a new key for a new request.`,
    });
  }
  return {
    status: outcome.status,
    headers: [...outcome.headers, [REPLAYED_HEADER.toLowerCase(), 'true']],
    body: outcome.body,
  };
}

function fromOutcome(outcome: RunOutcome<HttpOutcome>): HttpResponseData {
  switch (outcome.status) {
    case 'replayed':
    case 'executed':
      return replayResponse(outcome.value);
    case 'in_progress':
    case 'mismatch':
      return conflictResponse(outcome);
  }
}

/**
 * The answer to a run that met another request's record: 409 `in_progress` with `Retry-After` (the first
 * request still runs), or 422 `key_mismatch` (the key was used for a different request).
 */
export function conflictResponse(
  outcome: Extract<RunOutcome<unknown>, { status: 'in_progress' | 'mismatch' }>,
): HttpResponseData {
  return outcome.status === 'in_progress'
    ? problemResponse('in_progress', {
        detail:
          'A request with this key is still being processed. Retry after the delay in Retry-After to get its response.',
        retryAfterMs: outcome.retryAfterMs,
      })
    : problemResponse('key_mismatch', {
        detail: 'This key was first used with a different method, path, query or body.',
      });
}

/** A request's headers, as the middleware's facts and the transactional routes' requests both read them. */
type HeaderSource = { header(name: string): string | readonly string[] | null | undefined };

/**
 * The scope of a request without a `scope` function (or whose function gave none): a digest of its
 * credentials, with the route's `scopeCookies` and `scopeHeaders`; warns when it is empty while the request
 * carries a credential header of another name. The middleware's and the transactional routes' one rule.
 */
export function defaultScope(policy: RoutePolicy, request: HeaderSource): string {
  const scope = credentialScope(
    joined(request.header('authorization') ?? undefined),
    joined(request.header('cookie') ?? undefined, '; '),
    policy.scopeCookies,
    scopeHeaderValues(policy.scopeHeaders, request),
  );
  if (scope === '' && policy.scopeHeaders === undefined) warnUnscopedCredentials(request);
  return scope;
}

/**
 * The route's `scopeHeaders` with the request's values (several lines joined with `, `), for
 * {@link credentialScope}; `undefined` when the route has none (the common case allocates nothing).
 */
function scopeHeaderValues(
  names: readonly string[] | undefined,
  request: HeaderSource,
): Array<[string, string | undefined]> | undefined {
  return names?.map((name) => [name, joined(request.header(name) ?? undefined)]);
}

/** A header's value as one string: several lines joined (cookies with `; `, as HTTP/2 splits them). */
function joined(
  value: string | readonly string[] | undefined,
  separator = ', ',
): string | undefined {
  return typeof value === 'string' || value === undefined ? value : value.join(separator);
}

/**
 * Decide what to do with a request.
 *
 * Not an `async` function on purpose: when the scope and the body are at hand (the common case), the
 * claim is sent at once, without a trip through the microtask queue per `await`.
 * @throws (rejects with) anything the scope function or the store's codec throws that is not a known
 *   idempotency error (the adapter hands it to the framework's error handling).
 */
export function decide(
  engine: Idempotency,
  policy: RoutePolicy,
  request: RequestFacts,
): Promise<Decision> {
  try {
    const key = keyOf(policy, request);
    if (typeof key !== 'string') return Promise.resolve(key);
    const given = request.scope();
    // No scope (`undefined`, `null`, `''`, whitespace) means the credentials' digest: handed on as it is,
    // it would be keyed as the scope '' (or '  '), which every such caller shares, and a second user's
    // retry would be replayed the first user's response.
    const scope = isNoScope(given) ? defaultScope(policy, request) : given;
    if (typeof scope !== 'string') {
      return Promise.resolve(scope).then(async (resolved) => {
        const body = (await request.body()) as unknown;
        // A promise of no scope means the same as no scope.
        const scoped = isNoScope(resolved) ? defaultScope(policy, request) : resolved;
        return begin(engine, policy, request, key, scoped, fingerprintOf(policy, request, body));
      });
    }
    const body = request.body();
    if (isThenable(body)) {
      return Promise.resolve(body).then((resolved) =>
        begin(engine, policy, request, key, scope, fingerprintOf(policy, request, resolved)),
      );
    }
    return begin(engine, policy, request, key, scope, fingerprintOf(policy, request, body));
  } catch (error) {
    return Promise.reject(error);
  }
}

// The key of a request the layer applies to, or the decision when it does not apply or the key is bad.
function keyOf(policy: RoutePolicy, request: RequestFacts): string | Decision {
  if (!policyCovers(policy, request.method)) return PASS;
  if (isCorsPreflight(request.method, (name) => request.header(name))) return PASS;
  try {
    const parsed = parseKeyHeader(request.header(policy.headerName));
    if (parsed.present) {
      if (parsed.key.length >= policy.minKeyLength) return parsed.key;
      return {
        action: 'respond',
        response: problemResponse('invalid_key', {
          detail: `Invalid idempotency key: must be at least ${policy.minKeyLength} characters long`,
        }),
      };
    }
    if (policy.key === 'optional') return PASS;
    return {
      action: 'respond',
      response: problemResponse('missing_key', {
        detail: `This endpoint requires an ${policy.headerName === 'idempotency-key' ? 'Idempotency-Key' : policy.headerName} header.`,
      }),
    };
  } catch (error) {
    if (!isInvalidKeyError(error)) throw error;
    return {
      action: 'respond',
      response: problemResponse('invalid_key', { detail: error.message }),
    };
  }
}

function fingerprintOf(policy: RoutePolicy, request: RequestFacts, body: unknown): string {
  const contentType = request.header('content-type');
  let fingerprintHeaders: Record<string, string | undefined> | undefined;
  if (policy.fingerprintHeaders.length > 0) {
    fingerprintHeaders = {};
    for (const name of policy.fingerprintHeaders) {
      const value = request.header(name);
      fingerprintHeaders[name] =
        typeof value === 'string' || value === undefined ? value : value.join(', ');
    }
  }
  return httpFingerprint({
    method: request.method,
    path: request.path,
    query: request.query,
    contentType: typeof contentType === 'string' ? contentType : contentType?.[0],
    headers: fingerprintHeaders,
    body,
    rawBody: request.rawBody?.(),
    stringBody: stringBodyKind(body, (name) => request.header(name)),
  });
}

const PASS: Decision = Object.freeze({ action: 'pass' });

/**
 * Whether a response of this status releases the key rather than being stored: a 5xx unless the policy
 * stores those too, and a final status below 200 always. Such a status is a handler bug that Node sends as
 * an informational response: the client gets no final answer, and a stored one would give every retry the
 * same (it is run again instead, as after a 5xx).
 */
export function releasesKey(policy: RoutePolicy, status: number): boolean {
  return status >= 500 ? !policy.storeServerErrors : status < 200;
}

/**
 * One execution under a claim. A class rather than closures: one object per request instead of one per
 * method, and the methods are shared.
 */
class HttpExecution implements Execution {
  context!: IdempotencyContext;
  /** Resolves once the engine has stored the outcome or released the key; never rejects. */
  settled!: Promise<void>;
  private done = false;
  private resolveHandler!: (value: HttpOutcome) => void;
  private rejectHandler!: (reason: ReleaseClaim) => void;

  constructor(readonly policy: RoutePolicy) {}

  /** The handler the engine runs: a promise the adapter settles through `finish` or `fail`. */
  handler(): Promise<HttpOutcome> {
    return new Promise<HttpOutcome>((resolve, reject) => {
      this.resolveHandler = resolve;
      this.rejectHandler = reject;
    });
  }

  enter<T>(fn: () => T): T {
    return this.policy.asyncContext ? runWithContext(this.context, fn) : fn();
  }

  finish(response: CapturedResponse): Promise<void> {
    return this.respond(response.status, response);
  }

  uncaptured(status: number): Promise<void> {
    return this.respond(status, undefined);
  }

  cutOff(status: number): Promise<void> {
    return this.keepMarker({ kind: 'not_captured', status, timedOut: true });
  }

  answerLost(answered: number, sent: number): Promise<void> {
    if (releasesKey(this.policy, answered)) return this.fail(undefined);
    return this.keepMarker({ kind: 'not_captured', status: sent });
  }

  bodyFailed(status: number, error: unknown): Promise<void> {
    if (releasesKey(this.policy, status)) return this.fail(error);
    return this.keepMarker({ kind: 'not_captured', status, cut: true });
  }

  // Keep `marker` as the key's outcome (retries answered `response_not_captured`), unless settled already.
  private keepMarker(marker: NotCapturedMarker): Promise<void> {
    if (this.done) return this.settled;
    this.done = true;
    this.resolveHandler(marker);
    return this.settled;
  }

  // The handler's response went out (`undefined`: without its bytes being seen): store it, or release
  // the key (`releasesKey`).
  private respond(status: number, response: CapturedResponse | undefined): Promise<void> {
    if (this.done) return this.settled;
    this.done = true;
    if (releasesKey(this.policy, status)) {
      this.rejectHandler(new ReleaseClaim(undefined));
    } else {
      this.resolveHandler(
        response === undefined ? { kind: 'not_captured', status } : this.toOutcome(response),
      );
    }
    return this.settled;
  }

  fail(error: unknown, response?: CapturedResponse): Promise<void> {
    if (this.done) return this.settled;
    this.done = true;
    if (this.policy.storeServerErrors && response !== undefined && response.status >= 200) {
      this.resolveHandler(this.toOutcome(response));
    } else {
      this.rejectHandler(new ReleaseClaim(error));
    }
    return this.settled;
  }

  private toOutcome(response: CapturedResponse): HttpOutcome {
    return response.body === undefined
      ? { kind: 'too_large', status: response.status, bytes: response.bytes }
      : {
          kind: 'response',
          status: response.status,
          headers: pickHeaders(response.headers, this.policy.replayHeaders),
          body: response.body,
        };
  }
}

function begin(
  engine: Idempotency,
  policy: RoutePolicy,
  facts: RequestFacts,
  key: string,
  scope: string,
  fingerprint: string,
): Promise<Decision> {
  const execution = new HttpExecution(policy);
  const request: RunRequest & ScopeSourced = {
    key,
    scope,
    fingerprint,
    codec: httpResponseCodec,
    storeErrors: false,
    failOpen: policy.failOpen,
    // The scope function may return anything, `consumer:orders` included: such a scope is keyed apart
    // from the components' own (core/reserved-scopes.ts), every other exactly as before.
    [SCOPE_SOURCE]: HTTP_SCOPE_SOURCE,
  };
  if (policy.leaseMs !== undefined) request.leaseMs = policy.leaseMs;
  if (policy.retentionMs !== undefined) request.retentionMs = policy.retentionMs;

  // One promise for "whichever comes first": the handler is started, or the run ends without it.
  return new Promise<Decision>((resolve, reject) => {
    let started = false;
    const running = engine.run<HttpOutcome>(request, (context) => {
      started = true;
      // The engine's run context, extended with the key and scope: no copy, and its `signal` stays lazy
      // (an AbortSignal per request is a measurable cost, and most handlers never look at it).
      const extended = context as RunContext & { key: string; scope: string };
      extended.key = key;
      extended.scope = scope;
      execution.context = extended;
      resolve({ action: 'execute', execution });
      return execution.handler();
    });
    // Settled in the background once the handler has run; its errors (a lost lease, a store failure while
    // completing) cannot change a response that was already produced, and the engine's hooks report them.
    execution.settled = running.then(
      (outcome) => {
        if (started) return undefined;
        const response = fromOutcome(outcome);
        if (outcome.status !== 'replayed') {
          resolve({ action: 'respond', response });
          return undefined;
        }
        // A replay stored encoded, decoded for a retry that does not accept its encoding.
        const readable = replayForClient(response, joined(facts.header('accept-encoding')));
        if (isThenable(readable)) {
          return readable.then((decoded) => resolve({ action: 'respond', response: decoded }));
        }
        resolve({ action: 'respond', response: readable });
        return undefined;
      },
      (error: unknown) => {
        if (started) return;
        const response = errorResponse(error);
        if (response === undefined) reject(error);
        else resolve({ action: 'respond', response });
      },
    );
  });
}

// The answer to a run that failed before the handler started, or `undefined` for an error that is not
// the layer's to answer (the adapter hands it to the framework's error handling).
function errorResponse(error: unknown): HttpResponseData | undefined {
  if (isStoreUnavailableError(error)) {
    return problemResponse('store_unavailable', {
      detail: 'The request was not processed. Retry after the delay in Retry-After.',
      retryAfterMs: error.retryAfterMs,
    });
  }
  if (isInvalidKeyError(error)) {
    return problemResponse('invalid_key', { detail: error.message });
  }
  // A failure stored as the key's final outcome (a step whose result could not be encoded: its charge was
  // made, so the handler must not run again). Answered by the layer with a stable code, the same on every
  // retry, instead of a throw the framework turns into its own error page.
  if (isReplayedError(error)) {
    const { code } = error.original;
    return problemResponse('replayed_error', {
      detail:
        `The first request with this key failed${code === undefined ? '' : ` (${code})`} after its ` +
        'effects began, so it is not run again. Use a new key to try the operation again.',
    });
  }
  return undefined;
}
