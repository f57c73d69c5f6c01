/**
 * A transactional route's options and request, as every adapter hands them to
 * `./transactional-answer.ts`: the middleware's route options that apply when the key is required and the
 * answer is known before COMMIT, checked once when the route is created, and the framework-free facts of
 * one request.
 * @module
 */
import type { Duration } from '../core/duration.js';
import { InvalidOptionsError } from '../core/errors.js';
import { knownFields } from '../core/option-checks.js';
import {
  type HttpRouteOptions,
  type RoutePolicy,
  resolvePolicy,
  scopeFunctionOption,
} from './options.js';
import type { TransactionalRunner } from './transactional-answer.js';

/**
 * Options of the adapters' transactional routes, for a framework request `Req`: the middleware's route
 * options that apply to a route whose key is required and whose answer is known before COMMIT (see
 * `HttpRouteOptions` for each, `requestBodyLimit` included: the Express and Fastify routes read the
 * bodies the middleware reads, with its limit and its `false`), plus `scope`. Checked when the route is
 * created.
 */
export interface TransactionalRouteOptions<Req>
  extends Pick<
    HttpRouteOptions,
    | 'headerName'
    | 'minKeyLength'
    | 'replayHeaders'
    | 'fingerprintHeaders'
    | 'scopeCookies'
    | 'scopeHeaders'
    | 'storeServerErrors'
    | 'requestBodyLimit'
  > {
  /**
   * Who is calling: records are never shared across scopes. Return (or resolve to) `undefined`, `null`, `''`
   * or only whitespace for the default, a digest of the request's `Authorization` and `Cookie` headers (only the cookies
   * `scopeCookies` names, when set) and of the `scopeHeaders`; anything but a string or a finite number is refused (an object
   * would be keyed by its JSON, shared by every caller). Mount the route after authentication.
   */
  scope?: (request: Req) => string | undefined | null | Promise<string | undefined | null>;
  /**
   * Make `currentIdempotency()` work anywhere in the handler's call tree (AsyncLocalStorage), as the
   * middleware's option does: the same `key`, `scope`, `storageKey`, `token` and `attempt`, and a
   * `downstreamKey(step)` equal to `tx.downstreamKey(step)`. There is no lease in a transaction (the
   * claim is held until COMMIT or ROLLBACK), so `signal` never aborts and `extendLease()` does nothing;
   * `step(name, fn)` runs its function unrecorded (a crash rolls everything back, the retry runs it
   * again with the same downstream key). Off by default: on Node 20/22 it slows every promise in the
   * process; `tx` carries the claim's details for free. @default false
   */
  asyncContext?: boolean;
  /** How long answers are replayed. @default the transactional mode's `retentionMs` ('24h') */
  retentionMs?: Duration;
  /**
   * Largest answer body stored, in bytes. A larger answer is refused before COMMIT: the transaction rolls
   * back and the handler's error path runs (a 500), so nothing happens. The middleware cannot refuse (the
   * response is already on its way) and stores a `response_too_large` marker instead, after which a
   * retry never learns the outcome; here the answer is known before anything commits. @default 1048576
   */
  maxBodyBytes?: number;
}

/**
 * Options of a transactional route that reads the whole request body for its handler (the fetch
 * adapter's `transactionalHandler`): {@link TransactionalRouteOptions}, with a `requestBodyLimit` that
 * cannot be `false`.
 */
export interface BodyReadingRouteOptions<Req> extends TransactionalRouteOptions<Req> {
  /**
   * Largest request body read for the handler and the fingerprint, in bytes: the body is read whole
   * before the handler (which may not `await` on SQLite), so without a limit one request could hold
   * gigabytes in memory. A larger one gets `413 request_too_large` and no transaction starts: announced by
   * its `Content-Length`, without reading it; sent chunked, once it goes over. Not `false`: the handler
   * gets the body. @default 1048576 (1 MiB)
   */
  requestBodyLimit?: number;
}

/** The checked options of a transactional route. */
export interface TransactionalPolicy<Req> {
  /** The middleware's policy of the same options (the key is required). */
  readonly route: RoutePolicy;
  /** The `scope` option; `undefined` for the credentials' digest. */
  readonly scope: ((request: Req) => unknown) | undefined;
}

// Every key of TransactionalRouteOptions: anything else is refused, not ignored.
const OPTION_NAMES: readonly string[] =
  'scope headerName minKeyLength replayHeaders fingerprintHeaders scopeCookies scopeHeaders storeServerErrors retentionMs maxBodyBytes requestBodyLimit asyncContext'.split(
    ' ',
  );

/**
 * Check a transactional route's arguments once, when it is created, with the middleware's checks.
 * @param who - The factory's name, for the messages.
 * @param handsBodyToHandler - Whether the route reads the whole body for its handler (fetch), so that
 *   `requestBodyLimit: false` (read none) is refused; else `false` leaves to the handler a body no parser
 *   read, as with the middleware.
 * @throws InvalidOptionsError for a runner without `runInTransaction`, a handler that is not a function,
 *   a bad option value (`requestBodyLimit`: the middleware's check), or an option a transactional route
 *   does not have (`failOpen`, `key`, a typo: ignored, it would leave the route doing something else than
 *   what was asked).
 */
export function transactionalPolicy<Req>(
  who: string,
  runner: unknown,
  handler: unknown,
  options: TransactionalRouteOptions<Req> = {},
  handsBodyToHandler = false,
): TransactionalPolicy<Req> {
  if (
    typeof (runner as Partial<TransactionalRunner<unknown>> | null)?.runInTransaction !== 'function'
  ) {
    throw new InvalidOptionsError(
      `${who}: expected a transactional mode (postgresTransactional or sqliteTransactional), an object with runInTransaction()`,
    );
  }
  if (typeof handler !== 'function') {
    throw new InvalidOptionsError(`${who}: the handler must be a function`);
  }
  if (typeof options !== 'object' || options === null) {
    throw new InvalidOptionsError(`${who}: options must be an object`);
  }
  knownFields(options, who, OPTION_NAMES);
  // `false` would leave the handler without its body; any other bad value is `resolvePolicy`'s to refuse.
  if (handsBodyToHandler && options.requestBodyLimit === false) {
    throw new InvalidOptionsError(
      `${who}: requestBodyLimit: must be a non-negative integer (the handler gets the body), got false`,
    );
  }
  const { scope, ...route } = options;
  return {
    route: resolvePolicy({ ...route, key: 'required' }),
    scope: scopeFunctionOption(scope, `${who}: scope`),
  };
}

/** A request as the transactional route reads it, from any framework. */
export interface TransactionalRequest<Req> {
  /** The framework's request, for the `scope` function. */
  request: Req;
  method: string;
  /** Path without the query. */
  path: string;
  /** Raw query string. */
  query: string;
  /** Reads a request header (lower-case name). */
  header(name: string): string | readonly string[] | null | undefined;
  /** The body as the framework parsed it, or its bytes. */
  body: unknown;
  /** The JSON text kept beside a parsed body, which the fingerprint prefers (int64 ids stay exact). */
  rawBody?: Uint8Array | string | undefined;
}

/** The path and the query of a request URL (`/payments?x=1`), as the fingerprint takes them. */
export function pathAndQuery(url: string): { path: string; query: string } {
  const q = url.indexOf('?');
  return q === -1 ? { path: url, query: '' } : { path: url.slice(0, q), query: url.slice(q + 1) };
}
