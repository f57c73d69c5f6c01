/**
 * A body a middleware before the Express middleware read but left nowhere the fingerprint can see: the
 * request stream has been read, and yet `req.body` is `undefined`, no `req.rawBody` was kept and no upload
 * middleware left files. A middleware that reads the stream and keeps what it made of it on another
 * property (`req.xml`, `req.payload`) does that. Fingerprinted without its body, a key reused with another
 * body would be replayed the first one's answer: the request is refused instead, with what to change.
 * @module
 */
import type { Request } from 'express';
import { InvalidOptionsError } from '../core/errors.js';
import { keptRawBody } from '../http/fingerprint.js';
import { announcesBody } from '../http/unread-body.js';

/**
 * Whether the body of `req` went where the fingerprint cannot see it. Only asked when the body the
 * fingerprint would read is `undefined` and the stream is not unread.
 */
export function isUnseenBody(req: Request): boolean {
  return announcesBody(req) && keptRawBody(req) === undefined;
}

/** The error for a request whose body {@link isUnseenBody}: to the app's error handler (`next(error)`). */
export function unseenBodyError(req: Request): InvalidOptionsError {
  return new InvalidOptionsError(
    `idempotency-kit: ${req.method} ${req.originalUrl ?? req.url}: the request body was read before the ` +
      'middleware but req.body is undefined, so the fingerprint cannot cover the body the handler reads, ' +
      'and a key reused with another body would be replayed. Leave the parsed body in req.body, keep its ' +
      'bytes as req.rawBody, or mount the middleware before the one that reads the stream; or set ' +
      'requestBodyLimit: false on the route and list a digest header (content-digest) in fingerprintHeaders.',
  );
}
