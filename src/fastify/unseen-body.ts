/**
 * A body Fastify read before the plugin but left nowhere the fingerprint can see: `request.raw` has been
 * read, and yet `request.body` is `undefined` and no `rawBody` was kept. The content-type parser called
 * `done(null)` on a stream someone else consumed: most often a `preParsing` hook that replaced the
 * payload (a decompression hook pipes `request.raw` into its own stream) in front of a parser that leaves
 * the body to the handler (`@fastify/multipart`, whose `request.file()` then reads the consumed
 * `request.raw`), or a parser that keeps what it read elsewhere than in `request.body`. Fingerprinted
 * without its body, a key reused with another body would be replayed the first one's answer: the request
 * is refused instead, with what to change.
 * @module
 */
import type { FastifyRequest } from 'fastify';
import { InvalidOptionsError } from '../core/errors.js';
import { keptRawBody } from '../http/fingerprint.js';
import { announcesBody } from '../http/unread-body.js';

/**
 * Whether the body of `request` went where the fingerprint cannot see it (the stream read, nothing in
 * `request.body` or `request.rawBody`). Only asked when `request.body` is `undefined`.
 */
export function isUnseenBody(request: FastifyRequest): boolean {
  return announcesBody(request.raw) && keptRawBody(request) === undefined;
}

/** The error for a request whose body {@link isUnseenBody}: a 500 through Fastify's error handler. */
export function unseenBodyError(request: FastifyRequest): InvalidOptionsError {
  return new InvalidOptionsError(
    `idempotency-kit: ${request.method} ${request.routeOptions.url ?? request.url}: the request body was ` +
      'read before the plugin (request.raw consumed, e.g. by a preParsing hook that replaced the payload) ' +
      'but the content-type parser left request.body undefined, so the fingerprint cannot cover the body ' +
      'the handler reads, and a key reused with another body would be replayed. Hand the body to the ' +
      'handler as request.body (done(null, value), or done(null, payload) for a stream), keep its bytes as ' +
      'request.rawBody, or leave request.raw unread (a preParsing hook that decodes bodies @fastify/multipart ' +
      'reads cannot work: it reads request.raw); or set requestBodyLimit: false on the route and list a ' +
      'digest header (content-digest) in fingerprintHeaders.',
  );
}
