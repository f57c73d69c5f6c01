/**
 * A body a middleware before the Hono middleware read from `c.req.raw` itself (`await c.req.raw.text()`,
 * its stream, or a fetch-style handler it was handed to), not through `c.req`: what `c.req.json()`,
 * `c.req.text()` and the like read stays in Hono's body cache, from which the layer takes it; what is
 * read from `c.req.raw` is kept nowhere the layer (or the handler) can read it again. Reading the used body
 * threw "Body is unusable", a bare 500 on every keyed request: the request is refused instead, as Express
 * and Fastify refuse a body read before them and left nowhere, with what to change.
 * @module
 */
import type { Context } from 'hono';
import { InvalidOptionsError } from '../core/errors.js';

/**
 * Whether the body of `c` went where the fingerprint cannot see it: `c.req.raw` read, and nothing in
 * Hono's body cache. Only asked when that cache is empty.
 */
export function isUnseenBody(c: Context): boolean {
  return c.req.raw.bodyUsed;
}

/** The error for a request whose body {@link isUnseenBody}: a 500 through the app's onError. */
export function unseenBodyError(c: Context): InvalidOptionsError {
  return new InvalidOptionsError(
    `idempotency-kit: ${c.req.method} ${c.req.path}: the request body was read before the middleware ` +
      '(c.req.raw consumed, e.g. by await c.req.raw.text()) and Hono kept no copy of it, so the ' +
      'fingerprint cannot cover the body the handler reads, and neither can read it again. Read it ' +
      'through c.req (c.req.json(), c.req.text(), c.req.arrayBuffer(), c.req.formData(): Hono keeps what ' +
      'they read), or mount the middleware before the one that reads c.req.raw; or set ' +
      'requestBodyLimit: false on the route and list a digest header (content-digest) in ' +
      'fingerprintHeaders.',
  );
}
