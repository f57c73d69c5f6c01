/**
 * Options shared by every HTTP adapter, and their resolution into one per-route policy.
 * @module
 */

import { type Duration, toMs } from '../core/duration.js';
import {
  createIdempotency,
  ENGINE_OPTION_NAMES,
  type Idempotency,
  type IdempotencyOptions,
} from '../core/engine.js';
import { InvalidOptionsError } from '../core/errors.js';
import { MAX_KEY_LENGTH } from '../core/key.js';
import { booleanOption, knownFields, shownValue } from '../core/option-checks.js';
import { enableAsyncContext } from './context.js';
import { replayedHeaderSet } from './headers.js';

/** Whether a route needs an `Idempotency-Key`: `'required'` (missing → 400), `'optional'`, or `'off'`. */
export type KeyMode = 'required' | 'optional' | 'off';

/** Key modes, as constants. */
export const KeyMode = { Required: 'required', Optional: 'optional', Off: 'off' } as const;

/** The policy of one route (or the defaults of every route). */
export interface HttpRouteOptions {
  /** Whether the key is required, optional or ignored. @default 'optional' */
  key?: KeyMode;
  /** Methods the layer applies to; the key is ignored on every other method. @default ['POST', 'PATCH'] */
  methods?: readonly string[];
  /** Request header carrying the key. @default 'Idempotency-Key' */
  headerName?: string;
  /**
   * Shortest key accepted, in characters (1–255). A shorter key gets 400 `invalid_key` and never reaches
   * the store: with clients that send UUIDs, 36 (or 32) turns a client bug that sends `1` or a counter into
   * a loud error instead of keys that collide across operations. @default 1
   */
  minKeyLength?: number;
  /**
   * Response headers to store and replay besides content-type, location, cache-control and etag.
   * Set-Cookie, credentials and hop-by-hop headers are refused. @default []
   */
  replayHeaders?: readonly string[];
  /** Request headers that are part of the fingerprint (e.g. an API version). @default [] */
  fingerprintHeaders?: readonly string[];
  /**
   * The cookies that identify the caller (your session cookie), for the default scope: it then digests
   * `Authorization` and these cookies only, so a retry whose other cookies changed (a load balancer's
   * stickiness cookie, analytics) is still the same caller. Ignored when the adapter has a `scope`
   * function. @default every cookie (the whole `Cookie` header)
   */
  scopeCookies?: readonly string[];
  /**
   * Other request headers that identify the caller, for the default scope: it digests their values with
   * `Authorization` and the cookies. For an API whose callers authenticate with another header
   * (`X-API-Key`), or behind a proxy that replaces their credentials with a header of its own
   * (`X-Authenticated-User`): without them, such callers all share one scope, and one is replayed
   * another's response. Ignored when the adapter has a `scope` function. @default []
   */
  scopeHeaders?: readonly string[];
  /**
   * Largest response body kept for replay, in bytes. A larger response is sent once and not kept; a retry
   * gets a `response_too_large` problem (409) and is never re-run. @default 1048576 (1 MiB)
   */
  maxBodyBytes?: number;
  /**
   * Largest request body the layer reads itself for the fingerprint, in bytes; `false` to read none. A
   * body no parser before the layer has read (Express: `multer` or `express.text()` on the route after the
   * middleware; Fastify: `@fastify/multipart`, whose `request.file()` reads the stream in the handler;
   * fetch and Hono: every body, which the layer reads from the `Request`) is read up to this size and then
   * handed on unread to the handler. A larger one is refused with `413 request_too_large`, nothing run or
   * stored: announced by its `Content-Length`, without reading it; sent chunked, once it goes over. Read
   * unbounded instead, one request could hold gigabytes in memory; left out of the fingerprint, two such
   * bodies would look alike and a key reused for the other one would be replayed the first one's answer.
   * A body a parser before the layer has read (`express.json()`, Fastify's JSON parser, a Hono validator)
   * is fingerprinted as parsed, within that parser's own limit. The limit applies too to a body a parser
   * handed on as a stream (read, then handed to the handler as a new stream of the same bytes), and with
   * Express to uploaded files an upload middleware before it left on disk (read back for their hash,
   * counted together).
   *
   * `false` leaves such bodies unread and out of the fingerprint: only for a route whose
   * `fingerprintHeaders` carry a digest of the body the client computes (`Content-Digest`), so that a
   * large upload streams through without being held in memory.
   * @default 1048576 (1 MiB)
   */
  requestBodyLimit?: number | false;
  /** Store 5xx responses and thrown errors (Stripe's behaviour) instead of releasing the key. @default false */
  storeServerErrors?: boolean;
  /** Run the handler unprotected when the store is unreachable, instead of answering 503. @default false */
  failOpen?: boolean;
  /** Lease of a claim for this route. @default the engine's leaseMs ('30s') */
  leaseMs?: Duration;
  /** How long responses of this route are replayed. @default the engine's retentionMs ('24h') */
  retentionMs?: Duration;
  /**
   * Make `currentIdempotency()` work anywhere in the handler (AsyncLocalStorage). Off by default because
   * on Node 20/22 it slows every promise in the process; the context is always on the request object.
   * @default false
   */
  asyncContext?: boolean;
}

// Every key of HttpRouteOptions, checked by the compiler both ways (`satisfies`): the list `route()`
// accepts cannot drift from the interface.
const ROUTE_OPTION_FIELDS = {
  key: true,
  methods: true,
  headerName: true,
  minKeyLength: true,
  replayHeaders: true,
  fingerprintHeaders: true,
  scopeCookies: true,
  scopeHeaders: true,
  maxBodyBytes: true,
  requestBodyLimit: true,
  storeServerErrors: true,
  failOpen: true,
  leaseMs: true,
  retentionMs: true,
  asyncContext: true,
} as const satisfies Record<keyof HttpRouteOptions, true>;

const ROUTE_OPTION_NAMES = Object.keys(ROUTE_OPTION_FIELDS) as (keyof HttpRouteOptions)[];

// The engine's options that are not also route options: ignored beside an `engine`, which is built.
const ENGINE_ONLY_NAMES = ENGINE_OPTION_NAMES.filter(
  (name) => !Object.hasOwn(ROUTE_OPTION_FIELDS, name),
);

// What every adapter takes: the route options, the engine (or its options) and `scope`.
const ADAPTER_OPTION_NAMES: readonly string[] = [
  ...ROUTE_OPTION_NAMES,
  ...ENGINE_ONLY_NAMES,
  'engine',
  'scope',
];

/**
 * Refuse the route options `route` when one is not a route option: ignored, it would leave the route
 * doing something else than asked. `scope` above all: the adapter's option, given to a route it was
 * ignored, and the route's callers were told apart by their credentials only (one tenant replayed
 * another's answer when they shared them).
 */
function checkRouteFields(route: object): void {
  if (Object.hasOwn(route, 'scope')) {
    throw new InvalidOptionsError(
      "route options: `scope` belongs to the adapter's own options (`idempotency({ scope })`, Fastify's plugin options), not to a route; for a route with another scope, create a middleware (or register the plugin) with that scope",
    );
  }
  knownFields(route, 'route options', ROUTE_OPTION_NAMES);
}

/**
 * Check the top-level options of an adapter when it is created: the route options, the engine's (or
 * `engine`), `scope`, and the adapter's own `extra` names. An unknown name is refused (`keys: 'required'`
 * for `key` would run every request unprotected), and so is an engine option beside an `engine` (the
 * engine is built: it would be ignored).
 * @param who - The adapter's factory, for the messages.
 * @throws InvalidOptionsError naming the option and the accepted ones.
 */
export function checkAdapterOptions(
  options: object,
  who: string,
  extra: readonly string[] = [],
): void {
  if (typeof options !== 'object' || options === null) {
    throw new InvalidOptionsError(`${who}: options must be an object`);
  }
  const given = options as Record<string, unknown>;
  if (given.engine !== undefined && given.engine !== null) {
    for (const name of ENGINE_ONLY_NAMES) {
      if (given[name] === undefined || given[name] === null) continue;
      throw new InvalidOptionsError(
        `${who}: \`${name}\` is an option of the engine, and \`engine\` is already built: pass it to createIdempotency()`,
      );
    }
  }
  knownFields(
    options,
    who,
    extra.length === 0 ? ADAPTER_OPTION_NAMES : [...ADAPTER_OPTION_NAMES, ...extra],
  );
}

/** Where the engine comes from: an engine you built, or the options to build one. */
export type EngineSource =
  | { /** An engine from `createIdempotency()`, shared with other adapters. */ engine: Idempotency }
  | (IdempotencyOptions & { engine?: undefined });

/** The resolved policy of one route. */
export interface RoutePolicy {
  key: KeyMode;
  methods: ReadonlySet<string>;
  headerName: string;
  minKeyLength: number;
  replayHeaders: ReadonlySet<string>;
  fingerprintHeaders: readonly string[];
  /** The cookies the default scope digests; `undefined` for the whole `Cookie` header. */
  scopeCookies: ReadonlySet<string> | undefined;
  /** The other headers the default scope digests, lower-case, in name order; `undefined` for none. */
  scopeHeaders: readonly string[] | undefined;
  maxBodyBytes: number;
  /** The largest body the layer reads itself (`false`: none; see `HttpRouteOptions`). */
  requestBodyLimit: number | false;
  storeServerErrors: boolean;
  failOpen: boolean;
  leaseMs: number | undefined;
  retentionMs: number | undefined;
  asyncContext: boolean;
}

/**
 * Whether the layer applies to a request of `method` under `policy`: the route is not off and the method
 * is one the policy covers. Upper-cased only when needed: frameworks hand over the method as sent, and
 * clients send it upper-case.
 * @example
 * policyCovers(resolvePolicy({}), 'POST'); // true
 */
export function policyCovers(policy: RoutePolicy, method: string): boolean {
  return (
    policy.key !== 'off' && (policy.methods.has(method) || policy.methods.has(method.toUpperCase()))
  );
}

/** Default `maxBodyBytes`: 1 MiB. */
export const DEFAULT_MAX_BODY_BYTES = 1024 * 1024;

/** Default `requestBodyLimit`: 1 MiB, as `maxBodyBytes`. */
export const DEFAULT_REQUEST_BODY_LIMIT = 1024 * 1024;

/**
 * The engine of `source`: the one given, or a new one built from the engine's options in it (an adapter's
 * options also carry its own and the route's, which the engine refuses).
 */
export function resolveEngine(source: EngineSource): Idempotency {
  if (source.engine !== undefined) return source.engine;
  if ((source as { store?: unknown }).store === undefined) {
    throw new InvalidOptionsError('pass either `engine` (from createIdempotency) or `store`');
  }
  const given = source as unknown as Record<string, unknown>;
  const options: Record<string, unknown> = {};
  for (const name of ENGINE_OPTION_NAMES) {
    if (given[name] !== undefined) options[name] = given[name];
  }
  return createIdempotency(options as unknown as IdempotencyOptions);
}

const KEY_MODES: ReadonlySet<string> = new Set(Object.values(KeyMode));
// An HTTP token (RFC 9110 §5.6.2): a method, a header name, RFC 6265's cookie-name.
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

function cookieNameSet(names: readonly string[] | undefined): ReadonlySet<string> | undefined {
  if (names === undefined) return undefined;
  if (!Array.isArray(names) || names.length === 0) {
    throw new InvalidOptionsError('scopeCookies: expected a non-empty array of cookie names');
  }
  for (const name of names) {
    if (typeof name !== 'string' || !TOKEN.test(name)) {
      throw new InvalidOptionsError(`scopeCookies: '${String(name)}' is not a cookie name`);
    }
  }
  return new Set(names);
}

// `Authorization` and `Cookie` are in the default scope already: naming one would suggest it was not.
const ALWAYS_SCOPED: ReadonlySet<string> = new Set(['authorization', 'cookie']);

function scopeHeaderNames(names: readonly string[] | undefined): readonly string[] | undefined {
  if (names === undefined) return undefined;
  const lower = listOption(names, 'scopeHeaders', 'a header name').map((name) => {
    const header = name.toLowerCase();
    if (ALWAYS_SCOPED.has(header)) {
      throw new InvalidOptionsError(
        `scopeHeaders: '${name}' is always part of the default scope (use scopeCookies to narrow the cookies)`,
      );
    }
    return header;
  });
  // Sorted and without repeats: the same names in another order are the same scope.
  return lower.length === 0 ? undefined : [...new Set(lower)].sort();
}

/**
 * Merge route options over defaults and validate them. Run when a route is created, never per request.
 * @throws InvalidOptionsError for an option a route does not have (`scope`, a typo), an unknown key mode,
 *   a bad size or a header that may not be replayed.
 */
export function resolvePolicy(base: HttpRouteOptions, route: HttpRouteOptions = {}): RoutePolicy {
  checkRouteFields(base);
  checkRouteFields(route);
  const merged: HttpRouteOptions = { ...base, ...stripUndefined(route) };
  const key = merged.key ?? 'optional';
  if (!KEY_MODES.has(key))
    throw new InvalidOptionsError(`key: '${key}' is not required, optional or off`);
  const maxBodyBytes = merged.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  if (!Number.isSafeInteger(maxBodyBytes) || maxBodyBytes < 0) {
    throw new InvalidOptionsError(
      `maxBodyBytes: must be a non-negative integer, got ${shownValue(maxBodyBytes)}`,
    );
  }
  const requestBodyLimit = bodyLimitOption(merged.requestBodyLimit);
  // Checked, not coerced: from a config file or the environment, `failOpen: 'false'` is truthy and would
  // run handlers unprotected during an outage.
  const storeServerErrors = booleanOption(merged.storeServerErrors, 'storeServerErrors');
  const failOpen = booleanOption(merged.failOpen, 'failOpen');
  const asyncContext = booleanOption(merged.asyncContext, 'asyncContext');
  if (asyncContext) enableAsyncContext();
  const headerName = (merged.headerName ?? 'Idempotency-Key').toLowerCase();
  if (!/^[!#$%&'*+.^_`|~0-9a-z-]+$/.test(headerName)) {
    throw new InvalidOptionsError(`headerName: '${merged.headerName}' is not a header name`);
  }
  const minKeyLength = merged.minKeyLength ?? 1;
  if (!Number.isInteger(minKeyLength) || minKeyLength < 1 || minKeyLength > MAX_KEY_LENGTH) {
    throw new InvalidOptionsError(
      `minKeyLength: must be an integer from 1 to ${MAX_KEY_LENGTH}, got ${shownValue(minKeyLength)}`,
    );
  }
  return {
    key,
    methods: new Set(
      listOption(merged.methods ?? ['POST', 'PATCH'], 'methods', 'a method').map((m) =>
        m.toUpperCase(),
      ),
    ),
    headerName,
    minKeyLength,
    replayHeaders: replayedHeaderSet(
      listOption(merged.replayHeaders ?? [], 'replayHeaders', 'a header name'),
    ),
    fingerprintHeaders: listOption(
      merged.fingerprintHeaders ?? [],
      'fingerprintHeaders',
      'a header name',
    ).map((h) => h.toLowerCase()),
    scopeCookies: cookieNameSet(merged.scopeCookies),
    scopeHeaders: scopeHeaderNames(merged.scopeHeaders),
    maxBodyBytes,
    requestBodyLimit,
    storeServerErrors,
    failOpen,
    leaseMs: merged.leaseMs === undefined ? undefined : toMs(merged.leaseMs, 'leaseMs'),
    retentionMs:
      merged.retentionMs === undefined ? undefined : toMs(merged.retentionMs, 'retentionMs'),
    asyncContext,
  };
}

// Checked, not coerced: a limit from a config file or the environment may be a string ('1mb').
function bodyLimitOption(value: number | false | undefined): number | false {
  if (value === undefined) return DEFAULT_REQUEST_BODY_LIMIT;
  if (value === false || (Number.isSafeInteger(value) && value >= 0)) return value;
  throw new InvalidOptionsError(
    `requestBodyLimit: must be a non-negative integer or false, got ${shownValue(value)}`,
  );
}

// A list of HTTP tokens: methods and header names alike.
function listOption(value: unknown, name: string, what: string): readonly string[] {
  if (!Array.isArray(value)) {
    throw new InvalidOptionsError(`${name}: expected an array, got ${JSON.stringify(value)}`);
  }
  for (const item of value) {
    if (typeof item !== 'string' || !TOKEN.test(item)) {
      throw new InvalidOptionsError(`${name}: ${JSON.stringify(item)} is not ${what}`);
    }
  }
  return value as string[];
}

function stripUndefined<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}

/**
 * An adapter's or a transactional route's `scope` option, checked when it is created: a function of the
 * framework's request, or absent (`undefined` or `null`). Anything else (`scope: 'tenant'` from a config,
 * a forgotten arrow) would be called on every request, and each would answer 500 "scope is not a
 * function". (Not core's `scopeOption`, which checks the scope a run is given: a string.)
 * @param name - The option as the message names it.
 * @throws InvalidOptionsError for a value that is not a function.
 */
export function scopeFunctionOption<F extends (...args: never[]) => unknown>(
  scope: F | null | undefined,
  name = 'scope',
): F | undefined {
  // `null` is "not given", as for every option (a JSON config writes null for what it leaves out).
  if (scope === undefined || scope === null) return undefined;
  if (typeof scope === 'function') return scope;
  throw new InvalidOptionsError(
    `${name}: expected a function of the request, got ${shownValue(scope)}`,
  );
}

/** Pick the route options out of an adapter's options object (which also carries engine options). */
export function routeOptionsOf(options: HttpRouteOptions): HttpRouteOptions {
  const {
    key,
    methods,
    headerName,
    minKeyLength,
    replayHeaders,
    fingerprintHeaders,
    scopeCookies,
    scopeHeaders,
    maxBodyBytes,
    requestBodyLimit,
    storeServerErrors,
    failOpen,
    leaseMs,
    retentionMs,
    asyncContext,
  } = options;
  return stripUndefined({
    key,
    methods,
    headerName,
    minKeyLength,
    replayHeaders,
    fingerprintHeaders,
    scopeCookies,
    scopeHeaders,
    maxBodyBytes,
    requestBodyLimit,
    storeServerErrors,
    failOpen,
    leaseMs,
    retentionMs,
    asyncContext,
  });
}
