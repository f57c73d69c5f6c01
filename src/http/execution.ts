/**
 * The HTTP policy in one place: decide from a request whether the layer applies, answer invalid keys,
 * replays, conflicts, mismatches and store outages, and, when the handler must run, hold the claim until
 * the adapter hands back the captured response, then store it or release the key.
 *
 * Adapters only translate: request facts in, {@link Decision} out, captured response back.
 * @module
 */
import type { Idempotency, RunContext, RunOutcome } from '../core/engine.js';
import { isInvalidKeyError, isStoreUnavailableError } from '../core/errors.js';
import { type IdempotencyContext, runWithContext } from './context.js';
import { httpFingerprint } from './fingerprint.js';
import { type HeaderValue, pickHeaders, REPLAYED_HEADER } from './headers.js';
import { parseKeyHeader } from './key-header.js';
import type { RoutePolicy } from './options.js';
import { type HttpResponseData, problemResponse } from './problem.js';
import { type HttpOutcome, httpResponseCodec } from './response-codec.js';

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
  /** The scope (tenant, principal); computed only when the layer applies. */
  scope(): string | Promise<string>;
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
      return problemResponse('in_progress', {
        detail: 'Retry after the delay in Retry-After; the first request will not be run twice.',
        retryAfterMs: outcome.retryAfterMs,
      });
    case 'mismatch':
      return problemResponse('key_mismatch', {
        detail: 'This key was first used with a different method, path, query or body.',
      });
  }
}

/**
 * Decide what to do with a request.
 * @throws anything the scope function or the store's codec throws that is not a known idempotency error
 *   (the adapter hands it to the framework's error handling).
 */
export async function decide(
  engine: Idempotency,
  policy: RoutePolicy,
  request: RequestFacts,
): Promise<Decision> {
  if (policy.key === 'off' || !policy.methods.has(request.method.toUpperCase())) {
    return { action: 'pass' };
  }
  let key: string;
  try {
    const parsed = parseKeyHeader(request.header(policy.headerName));
    if (!parsed.present) {
      if (policy.key === 'optional') return { action: 'pass' };
      return {
        action: 'respond',
        response: problemResponse('missing_key', {
          detail: `This endpoint requires an ${policy.headerName === 'idempotency-key' ? 'Idempotency-Key' : policy.headerName} header.`,
        }),
      };
    }
    key = parsed.key;
  } catch (error) {
    if (!isInvalidKeyError(error)) throw error;
    return {
      action: 'respond',
      response: problemResponse('invalid_key', { detail: error.message }),
    };
  }

  const scope = await request.scope();
  const contentType = request.header('content-type');
  const fingerprintHeaders: Record<string, string | undefined> = {};
  for (const name of policy.fingerprintHeaders) {
    const value = request.header(name);
    fingerprintHeaders[name] =
      typeof value === 'string' || value === undefined ? value : value.join(', ');
  }
  const fingerprint = httpFingerprint({
    method: request.method,
    path: request.path,
    query: request.query,
    contentType: typeof contentType === 'string' ? contentType : contentType?.[0],
    headers: fingerprintHeaders,
    body: await request.body(),
  });

  return begin(engine, policy, key, scope, fingerprint);
}

async function begin(
  engine: Idempotency,
  policy: RoutePolicy,
  key: string,
  scope: string,
  fingerprint: string,
): Promise<Decision> {
  let started!: (context: RunContext) => void;
  const startedPromise = new Promise<RunContext>((resolve) => {
    started = resolve;
  });
  let settle!: { resolve: (value: HttpOutcome) => void; reject: (reason: ReleaseClaim) => void };
  const handlerDone = new Promise<HttpOutcome>((resolve, reject) => {
    settle = { resolve, reject };
  });

  const running = engine.run<HttpOutcome>(
    {
      key,
      scope,
      fingerprint,
      codec: httpResponseCodec,
      storeErrors: false,
      ...(policy.leaseMs === undefined ? {} : { leaseMs: policy.leaseMs }),
      ...(policy.retentionMs === undefined ? {} : { retentionMs: policy.retentionMs }),
      failOpen: policy.failOpen,
    },
    (context) => {
      started(context);
      return handlerDone;
    },
  );
  // Settled in the background once the handler has run; its errors (a lost lease, a store failure while
  // completing) cannot change a response that was already produced, and the engine's hooks report them.
  const settled = running.then(
    () => undefined,
    () => undefined,
  );

  const first = await Promise.race([
    startedPromise.then((context) => ({ started: context }) as const),
    running.then(
      (outcome) => ({ outcome }) as const,
      (error: unknown) => ({ error }) as const,
    ),
  ]);
  if ('outcome' in first) return { action: 'respond', response: fromOutcome(first.outcome) };
  if ('error' in first) {
    if (isStoreUnavailableError(first.error)) {
      return {
        action: 'respond',
        response: problemResponse('store_unavailable', {
          detail: 'The request was not processed. Retry after the delay in Retry-After.',
          retryAfterMs: first.error.retryAfterMs,
        }),
      };
    }
    if (isInvalidKeyError(first.error)) {
      return {
        action: 'respond',
        response: problemResponse('invalid_key', { detail: first.error.message }),
      };
    }
    throw first.error;
  }

  const run = first.started;
  const context: IdempotencyContext = {
    key,
    scope,
    storageKey: run.storageKey,
    token: run.token,
    attempt: run.attempt,
    signal: run.signal,
    downstreamKey: run.downstreamKey,
    extendLease: run.extendLease,
  };
  let done = false;
  const store = (response: CapturedResponse): HttpOutcome =>
    response.body === undefined
      ? { kind: 'too_large', status: response.status, bytes: response.bytes }
      : {
          kind: 'response',
          status: response.status,
          headers: pickHeaders(response.headers, policy.replayHeaders),
          body: response.body,
        };
  const execution: Execution = {
    context,
    policy,
    enter: policy.asyncContext ? (fn) => runWithContext(context, fn) : (fn) => fn(),
    finish(response) {
      if (done) return settled;
      done = true;
      if (response.status >= 500 && !policy.storeServerErrors)
        settle.reject(new ReleaseClaim(undefined));
      else settle.resolve(store(response));
      return settled;
    },
    fail(error, response) {
      if (done) return settled;
      done = true;
      if (policy.storeServerErrors && response !== undefined) settle.resolve(store(response));
      else settle.reject(new ReleaseClaim(error));
      return settled;
    },
  };
  return { action: 'execute', execution };
}
