/**
 * The default scope of a request: a digest of its credentials, so that a stored response is only ever
 * replayed to the caller that produced it. Requests with no credentials share the empty scope.
 * @module
 */
import { createHash } from 'node:crypto';
import { ScopeSource } from '../core/reserved-scopes.js';

/**
 * Where an HTTP request's scope comes from, for the engine: a scope under a component's reserved prefix
 * (`consumer:orders`, from a `scope` function) is then keyed apart from that component's records.
 */
export const HTTP_SCOPE_SOURCE = ScopeSource.Http;

/**
 * True when a `scope` function gave no scope: `undefined`, `null`, or a string that is empty or only
 * whitespace (`req.user?.tenantId ?? ''`, a tenant header the request does not carry). The layer then
 * digests the credentials, as without a function. Kept as given, `''` was a scope every such caller
 * shared: a second caller sending the first one's key was replayed the first one's response. Whitespace
 * counts as empty because no principal is named by it, and a blank scope shared the same way.
 */
export function isNoScope(scope: unknown): scope is undefined | null | '' {
  return (
    scope === undefined || scope === null || (typeof scope === 'string' && scope.trim() === '')
  );
}

/**
 * A digest of the `Authorization` header, the cookies and the values of `headers`; `''` when the request
 * carries none of them.
 *
 * Without `cookieNames`, the whole `Cookie` header counts: safe against replaying to another caller, but a
 * retry whose cookies changed in between (a load balancer's stickiness cookie, an analytics cookie, a
 * rotated session) lands in another scope and runs again. With `cookieNames` (the route's `scopeCookies`),
 * only those cookies count, by name and value in name order, and every other cookie is ignored.
 *
 * `headers` (the route's `scopeHeaders`, as `[lower-case name, value]` in name order) are other request
 * headers that identify the caller: an API key header, a proxy's authenticated-user header. Without them
 * the digest is the one it always was, so storage keys do not change. Only the digest is used (inside the
 * hashed storage key); credentials are never stored.
 */
export function credentialScope(
  authorization: string | undefined | null,
  cookie: string | undefined | null,
  cookieNames?: ReadonlySet<string>,
  headers?: ReadonlyArray<readonly [string, string | undefined]>,
): string {
  const cookies =
    cookieNames === undefined || !cookie ? cookie : selectCookies(cookie, cookieNames);
  if (headers === undefined || !headers.some(([, value]) => value)) {
    if (!authorization && !cookies) return '';
    return createHash('sha256')
      .update(JSON.stringify([authorization ?? '', cookies ?? '']))
      .digest('base64url');
  }
  // Three members, not two: never the digest of a request with only Authorization and cookies.
  const named = headers.map(([name, value]) => [name, value ?? '']);
  return createHash('sha256')
    .update(JSON.stringify([authorization ?? '', cookies ?? '', named]))
    .digest('base64url');
}

/**
 * Request headers that usually carry who the caller is, outside `Authorization` and `Cookie`: API keys,
 * and the headers authenticating proxies send upstream in place of the credentials they checked (oauth2-
 * proxy, AWS ALB, Azure App Service, Google IAP, Envoy/Istio mutual TLS). The default scope does not digest
 * them: {@link warnUnscopedCredentials} says so.
 */
export const CREDENTIAL_HEADERS: readonly string[] = [
  'x-api-key',
  'api-key',
  'x-auth-token',
  'x-access-token',
  'x-forwarded-user',
  'x-forwarded-email',
  'x-auth-request-user',
  'x-authenticated-user',
  'x-amzn-oidc-identity',
  'x-ms-client-principal-id',
  'x-goog-authenticated-user-id',
  'x-forwarded-client-cert',
];

let warnedUnscoped = false;
/** Requests in the empty scope seen so far: one in {@link SAMPLED} is looked at. */
let unscopedRequests = 0;
// A diagnostic, so a sample is enough: an API whose callers send a key is found at its first request,
// and public requests (most of an unauthenticated API's) cost a counter instead of a dozen header reads.
const SAMPLED = 32;

/**
 * Warn, once per process, when a request the default scope put in the empty scope (no `Authorization`,
 * no cookies, no `scopeHeaders`) carries one of {@link CREDENTIAL_HEADERS}: its callers most likely
 * authenticate with that header, all share the empty scope, and one can be replayed another's response.
 * A warning rather than a change of scope, because digesting the header now would change the storage keys
 * of requests already recorded, and their retries would run again. Looks at the first request in the
 * empty scope and one in 32 after it (a dozen header reads each; a counter for the others), until it
 * has warned.
 */
export function warnUnscopedCredentials(request: {
  header(name: string): string | readonly string[] | null | undefined;
}): void {
  if (warnedUnscoped || unscopedRequests++ % SAMPLED !== 0) return;
  const found = CREDENTIAL_HEADERS.find((name) => {
    const value = request.header(name);
    return value !== undefined && value !== null && value !== '';
  });
  if (found === undefined) return;
  warnedUnscoped = true;
  process.emitWarning(
    `idempotency-kit: a request with neither Authorization nor cookies carries ${found}, which the default ` +
      'scope does not digest: every such caller shares one scope, and one sending the same Idempotency-Key ' +
      `and body as another is replayed the other's response. Name the header in the route's scopeHeaders ` +
      `(scopeHeaders: ['${found}']), or give a scope function returning the authenticated principal.`,
    { code: 'IDEMPOTENCY_KIT_UNSCOPED_CREDENTIALS' },
  );
}

/**
 * The `name=value` pairs of a `Cookie` header whose names are in `names`, sorted and joined with `; `
 * (`''` when there are none). A name sent twice keeps both values, in the order sent.
 */
export function selectCookies(cookie: string, names: ReadonlySet<string>): string {
  const picked: Array<{ name: string; pair: string }> = [];
  for (const part of cookie.split(';')) {
    const pair = part.trim();
    const equals = pair.indexOf('=');
    const name = equals < 0 ? pair : pair.slice(0, equals).trim();
    if (names.has(name)) picked.push({ name, pair });
  }
  // Array.prototype.sort is stable: the values of one name keep the order they came in.
  picked.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return picked.map(({ pair }) => pair).join('; ');
}
