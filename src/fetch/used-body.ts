/**
 * A `Request` handed to the wrapper with its body already read (`bodyUsed`: `await request.json()` in a
 * wrapper around it) or locked (a reader holds its stream): the fingerprint cannot read it, and neither
 * can the handler. Reading it threw undici's bare TypeError ("unusable", "ReadableStream is locked"); the request is refused
 * with what to change instead, before anything is claimed or run, as Hono refuses a body read from
 * `c.req.raw` before its middleware (`../hono/unseen-body.ts`).
 * @module
 */
import { InvalidOptionsError } from '../core/errors.js';

/** Whether the body of `request` can no longer be read (used or locked). */
export function isUnreadableBody(request: Request): boolean {
  return request.bodyUsed || request.body?.locked === true;
}

/**
 * The error for a request whose body {@link isUnreadableBody}: it propagates to your runtime.
 * @param wrapper - The wrapper refusing it (`withIdempotency`, `transactionalHandler`).
 */
export function unreadableBodyError(request: Request, wrapper: string): InvalidOptionsError {
  const { pathname } = new URL(request.url);
  return new InvalidOptionsError(
    `idempotency-kit: ${request.method} ${pathname}: the request body was read (or locked) before ` +
      `${wrapper} got the Request, so the fingerprint cannot cover it and the handler cannot read ` +
      'it. Hand the wrapper the Request before anything reads its body (or a new Request made from the ' +
      'bytes read), or set requestBodyLimit: false and list a digest header (content-digest) in ' +
      'fingerprintHeaders.',
  );
}
