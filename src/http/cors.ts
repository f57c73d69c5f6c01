/**
 * Browsers and the layer's own headers. A script on another origin reads only the CORS-safelisted response
 * headers (Content-Type, Cache-Control, …) and those the response names in `Access-Control-Expose-Headers`.
 * The headers the layer adds to its own answers are none of them: `Idempotent-Replayed` on a replay,
 * `Retry-After` on a 409 or a 503, `Link` on a problem. The application's CORS middleware, mounted before the
 * layer, has already set its headers on the response when the layer answers; the layer appends its own
 * names to that middleware's expose list, so that a browser client can tell a replay from a first execution
 * and knows when to retry. It changes nothing on a response that is not a CORS one (no
 * `Access-Control-Allow-Origin`): the CORS policy stays the application's.
 * @module
 */
import type { HeaderValue } from './headers.js';
import type { HttpResponseData } from './problem.js';

/** The headers the layer adds to its own answers, as they are named in an expose list. */
const LAYER_HEADERS = new Map([
  ['idempotent-replayed', 'Idempotent-Replayed'],
  ['retry-after', 'Retry-After'],
  ['link', 'Link'],
]);

/** One header value as text: a repeated header's values joined as they go on the wire. */
function headerText(value: HeaderValue | null): string | undefined {
  if (value === undefined || value === null) return undefined;
  return typeof value === 'object' ? value.join(', ') : String(value);
}

/**
 * The `Access-Control-Expose-Headers` value the layer's answer needs, or `undefined` to leave the header
 * as it is: the response is not a CORS one (`read('access-control-allow-origin')` is absent), the answer
 * adds no header of the layer's, or the expose list already covers them (it names them, or it is `*` on a
 * response that does not allow credentials: with credentials, `*` is a header name, not a wildcard).
 * `read` gives the response's current header by lower-case name (`res.getHeader`, `Headers.get`).
 * @example
 * // cors() set Access-Control-Allow-Origin and Access-Control-Expose-Headers: X-Request-Id
 * exposedLayerHeaders(replay, (name) => res.getHeader(name)); // 'X-Request-Id, Idempotent-Replayed'
 */
export function exposedLayerHeaders(
  answer: HttpResponseData,
  read: (name: string) => HeaderValue | null,
): string | undefined {
  const added: string[] = [];
  for (const [name] of answer.headers) {
    const exposedName = LAYER_HEADERS.get(name);
    if (exposedName !== undefined && !added.includes(exposedName)) added.push(exposedName);
  }
  if (added.length === 0 || !headerText(read('access-control-allow-origin'))) return undefined;
  const current = headerText(read('access-control-expose-headers'))?.trim() || undefined;
  const listed = new Set(
    (current ?? '')
      .split(',')
      .map((name) => name.trim().toLowerCase())
      .filter((name) => name !== ''),
  );
  const credentials = headerText(read('access-control-allow-credentials'))?.trim().toLowerCase();
  if (listed.has('*') && credentials !== 'true') return undefined;
  const missing = added.filter((name) => !listed.has(name.toLowerCase()));
  if (missing.length === 0) return undefined;
  return current === undefined ? missing.join(', ') : `${current}, ${missing.join(', ')}`;
}

/**
 * True for a CORS preflight: an `OPTIONS` request carrying `Access-Control-Request-Method`, which a browser
 * sends before a cross-origin request with `Idempotency-Key`, without that header (it asks whether it may
 * send it). The layer never covers one, whatever the route's `methods`: a `400 missing_key` or any other
 * answer of the layer's would make the browser give up the request it asks about.
 * @param header - Reads a request header (lower-case name).
 */
export function isCorsPreflight(
  method: string,
  header: (name: string) => string | readonly string[] | null | undefined,
): boolean {
  // The length first: a covered request is a POST or a PATCH nearly always, and pays one comparison.
  if (method.length !== 7 || method.toUpperCase() !== 'OPTIONS') return false;
  const asked = header('access-control-request-method');
  return asked !== undefined && asked !== null;
}
