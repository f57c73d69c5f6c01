/**
 * Which response headers are stored and replayed: an allow-list (content-type, location, cache-control,
 * etag, plus what the route adds), minus a deny-list that no option can override (cookies, credentials,
 * hop-by-hop and framing headers, CORS headers). Content-Encoding is neither: it is stored exactly when the
 * stored bytes are encoded ({@link keepContentEncoding}).
 * @module
 */
import { InvalidOptionsError } from '../core/errors.js';

/** Headers replayed by default. */
export const DEFAULT_REPLAYED_HEADERS = [
  'content-type',
  'location',
  'cache-control',
  'etag',
] as const;

/** The header that marks a replay. */
export const REPLAYED_HEADER = 'Idempotent-Replayed';

// Never replayed: a cookie or credential belongs to the original exchange, and hop-by-hop or framing
// headers describe one connection (the framework recomputes length and encoding for the replay).
const NEVER_REPLAYED = new Set([
  'set-cookie',
  'set-cookie2',
  'authorization',
  'proxy-authorization',
  'www-authenticate',
  'proxy-authenticate',
  'cookie',
  'connection',
  'keep-alive',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'content-length',
  'date',
  REPLAYED_HEADER.toLowerCase(),
]);

/**
 * The set of lower-case header names to store for a route.
 * @throws InvalidOptionsError when `extra` names a header that must never be replayed.
 */
export function replayedHeaderSet(extra: readonly string[] = []): ReadonlySet<string> {
  const names = new Set<string>(DEFAULT_REPLAYED_HEADERS);
  for (const name of extra) {
    const lower = name.toLowerCase();
    if (NEVER_REPLAYED.has(lower)) {
      throw new InvalidOptionsError(
        `replayHeaders: '${name}' is never replayed (cookies, credentials and hop-by-hop headers)`,
      );
    }
    if (lower === CONTENT_ENCODING) {
      throw new InvalidOptionsError(
        `replayHeaders: '${name}' is not configurable: it is stored exactly when the stored body is encoded (see docs/http.md, Replayed headers)`,
      );
    }
    // Proxy-* headers (Proxy-Status, Proxy-Agent…) describe the hop through a proxy, as hop-by-hop headers
    // describe one connection.
    if (lower.startsWith('proxy-')) {
      throw new InvalidOptionsError(
        `replayHeaders: '${name}' is never replayed (proxy headers describe one hop, not the response)`,
      );
    }
    // CORS headers answer the request at hand (its Origin): a stored one would grant a later caller's
    // origin what the first caller's was granted. The CORS middleware sets them on every answer, replays too.
    if (lower.startsWith('access-control-')) {
      throw new InvalidOptionsError(
        `replayHeaders: '${name}' is never replayed (CORS headers: mount your CORS middleware before the idempotency layer, and it sets them on replays too)`,
      );
    }
    names.add(lower);
  }
  return names;
}

const CONTENT_ENCODING = 'content-encoding';

/** A header value as frameworks hold them. */
export type HeaderValue = string | number | readonly string[] | undefined;

/**
 * The allowed headers of a response, read one name at a time with `read` (a response's `getHeader`, a
 * `Headers` object's `get`): cheaper than copying every header to keep a few. Missing ones are skipped, and
 * so are the ones the response's `Connection` header names: those describe this connection only
 * (RFC 9110 §7.6.1), and a cache must not store them (RFC 9111 §3.1), so a replay, sent on another
 * connection, must not carry them either, even when the route allows the name.
 */
export function readAllowedHeaders(
  allowed: ReadonlySet<string>,
  read: (name: string) => HeaderValue | null,
): Array<[string, HeaderValue]> {
  const out: Array<[string, HeaderValue]> = [];
  for (const name of allowed) {
    const value = read(name);
    if (value !== undefined && value !== null) out.push([name, value]);
  }
  const connection = read('connection');
  return connection === undefined || connection === null || out.length === 0
    ? out
    : withoutConnectionOptions(out, connection);
}

// The pairs whose name is not one of the connection options (`close`, `keep-alive`, header names) listed
// in a `Connection` value: comma-separated, any case, any number of header lines.
function withoutConnectionOptions(
  headers: Array<[string, HeaderValue]>,
  connection: HeaderValue,
): Array<[string, HeaderValue]> {
  const lines = typeof connection === 'object' ? connection : [String(connection)];
  const named = new Set<string>();
  for (const line of lines) {
    for (const option of line.split(',')) named.add(option.trim().toLowerCase());
  }
  return headers.filter(([name]) => !named.has(name));
}

/**
 * Add the response's Content-Encoding to the `headers` to store when the captured bytes are encoded, that
 * is when the header was set before the bytes reached the capture: the handler compressed its body, or a
 * compression middleware mounted inside the layer did. Without it a replay would send gzip bytes as plain
 * JSON. Read at any later moment the header may belong to a compression middleware mounted *before* the
 * layer, which encodes after the capture: such a body is stored as the handler wrote it, without the
 * header, and that middleware encodes the replay again (for the client that asks for it). `identity` is no
 * encoding.
 */
export function keepContentEncoding(
  headers: Array<[string, HeaderValue]>,
  encoding: HeaderValue | null,
): void {
  if (encoding === undefined || encoding === null || encoding === '' || encoding === 'identity')
    return;
  headers.push([CONTENT_ENCODING, encoding]);
}

/**
 * Keep the allowed headers of `headers` (and Content-Encoding, which the capture includes only with an
 * encoded body), as `[lower-case name, value]` pairs (one pair per value).
 */
export function pickHeaders(
  headers: Iterable<readonly [string, HeaderValue]>,
  allowed: ReadonlySet<string>,
): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  for (const [name, value] of headers) {
    const lower = name.toLowerCase();
    if (value === undefined || !(allowed.has(lower) || lower === CONTENT_ENCODING)) continue;
    if (typeof value === 'string' || typeof value === 'number') out.push([lower, String(value)]);
    else for (const v of value) out.push([lower, v]);
  }
  return out;
}
