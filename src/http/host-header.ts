/**
 * The `Host` a request header reader gives when the request has no `Host` header: HTTP/2 names the host in
 * the `:authority` pseudo-header instead (RFC 9113 §8.3.1), and Node's HTTP/2 layer, Fastify with
 * `http2: true` and `@hono/node-server` hand on no `host` at all. A route that names `host` in its
 * `fingerprintHeaders` (one token valid on `a.example.com` and `b.example.com`) then fingerprinted both
 * hosts alike on HTTP/2, and `b` was replayed `a`'s response.
 * @module
 */

/**
 * `value` as read, or, for the `host` header when it is absent, the request's authority (`authority()`:
 * the `:authority` pseudo-header, or the host of a fetch `Request`'s URL). Only called when a header
 * read came back empty, so the common request pays nothing.
 */
export function withAuthority<T>(
  name: string,
  value: T | undefined | null,
  authority: () => T | undefined,
): T | undefined {
  if (value !== undefined && value !== null) return value;
  return name === 'host' ? authority() : undefined;
}
