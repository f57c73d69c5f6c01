/**
 * The body of a Fastify request as the fingerprint sees it, for the plugin and `transactionalRoute`:
 * - what the content-type parser made of it (`request.body`): the common case, a few property reads;
 * - the bytes a parser left in `request.raw` for the handler (`@fastify/multipart`: `request.file()`
 *   reads the stream), read here and handed back (`../http/unread-body.ts`);
 * - the bytes of a stream a parser handed on as the body (a `preParsing` hook's, `done(null, payload)`),
 *   read here, `request.body` then a new stream of them (`../http/stream-body.ts`);
 * - refused: a body read but left nowhere (`./unseen-body.ts`).
 * @module
 */
import type { FastifyRequest } from 'fastify';
import { isStreamBody, readStreamBody } from '../http/stream-body.js';
import { hasUnreadBody, readUnreadBody } from '../http/unread-body.js';
import { isUnseenBody, unseenBodyError } from './unseen-body.js';

/**
 * The body of `request` for the fingerprint: a value, or a promise when the layer reads it.
 * @param bodyLimit - The most bytes read (`requestBodyLimit`); `false`: a body the parser did not read is
 *   left unread and out of the fingerprint.
 * @throws InvalidOptionsError for a body read but left nowhere; (rejects with) RequestTooLargeError past
 *   `bodyLimit`, or the stream's error.
 */
export function requestBody(request: FastifyRequest, bodyLimit: number | false): unknown {
  if (bodyLimit !== false && hasUnreadBody(request.raw)) {
    return readUnreadBody(request.raw, bodyLimit).then((bytes) =>
      bytes.byteLength === 0 ? request.body : bytes,
    );
  }
  const body = request.body;
  if (body === undefined && bodyLimit !== false && isUnseenBody(request)) {
    throw unseenBodyError(request);
  }
  if (!isStreamBody(body)) return body;
  // Without a limit, left unread and out of the fingerprint (the stream object would make it random).
  if (bodyLimit === false) return undefined;
  return readStreamBody(body, bodyLimit, request.raw).then(({ bytes, stream }) => {
    request.body = stream;
    return bytes;
  });
}
