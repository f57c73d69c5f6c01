/**
 * The body of an Express request as the fingerprint sees it, for the middleware and `transactionalRoute`:
 * - the bytes nobody has read yet (no parser before, or one mounted after), read here and handed back to
 *   the stream (`../http/unread-body.ts`); an empty read keeps `req.body` (`{}` on Express 4);
 * - else what a parser before made of it (`req.body`), with the files an upload middleware took out of it
 *   (`./uploads.ts`): the common case, a few property reads;
 * - the bytes of a stream a middleware set as `req.body`, read here, `req.body` then a new stream of them
 *   (`../http/stream-body.ts`);
 * - refused: a body read but left nowhere (`./unseen-body.ts`).
 * @module
 */
import type { Request } from 'express';
import { isStreamBody, readStreamBody } from '../http/stream-body.js';
import { hasUnreadBody, readUnreadBody } from '../http/unread-body.js';
import { isUnseenBody, unseenBodyError } from './unseen-body.js';
import { bodyWithUploads } from './uploads.js';

/**
 * The body of `req` for the fingerprint: a value, or a promise when the layer reads it.
 * @param bodyLimit - The most bytes read (`requestBodyLimit`); `false`: a body no parser read is left
 *   unread and out of the fingerprint; also the most bytes of uploaded files read back from disk
 *   (`false`: covered by field, name, type and size).
 * @throws InvalidOptionsError for a body read but left nowhere; (rejects with) RequestTooLargeError past
 *   a limit, or the stream's (or a file's) error.
 */
export function requestBody(req: Request, bodyLimit: number | false): unknown {
  if (bodyLimit !== false && hasUnreadBody(req)) {
    return readUnreadBody(req, bodyLimit).then((bytes) =>
      bytes.byteLength === 0 ? (req.body as unknown) : bytes,
    );
  }
  const body = bodyWithUploads(req, bodyLimit);
  if (body === undefined && bodyLimit !== false && isUnseenBody(req)) throw unseenBodyError(req);
  if (!isStreamBody(body)) return body;
  // Without a limit, left unread and out of the fingerprint (the stream object would make it random).
  if (bodyLimit === false) return undefined;
  return readStreamBody(body, bodyLimit, req).then(({ bytes, stream }) => {
    req.body = stream;
    return bytes;
  });
}
