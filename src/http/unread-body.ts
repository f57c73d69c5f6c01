/**
 * Request bodies no body parser before the layer has read, on Node's `IncomingMessage`: under Express a
 * parser mounted on the route after the middleware (`multer`, a per-route `express.text()`), or none at
 * all; under Fastify a content-type parser that leaves the stream to the handler (`@fastify/multipart`,
 * whose `request.file()` reads `request.raw`). The framework then leaves the parsed body empty and the
 * stream unread, and a fingerprint of the parsed body would make two requests with different bodies (two
 * files, two texts) alike: a key reused for the other one would be replayed the first one's answer
 * instead of refused with 422.
 *
 * So the layer reads such a body itself, up to a limit (`requestBodyLimit`), and hands the bytes back to
 * the stream with `readable.unshift()` (the documented way for a reader to give back data it pulled too
 * early) before the stream has emitted `'end'`: the parsers and the handler after it read the body as if
 * nobody had. Over the limit, the request is refused (413, {@link requestTooLargeResponse}) rather than
 * run with a fingerprint that does not cover its body. The fetch and Hono adapters read web bodies with
 * the same limit and error (`./web.ts`).
 * @module
 */
import type { IncomingMessage } from 'node:http';
import { type HttpResponseData, problemResponse } from './problem.js';

/** A body larger than the limit, told apart by its brand (two copies of the package may be loaded). */
export class RequestTooLargeError extends Error {
  /** Brand checked by {@link isRequestTooLargeError}. */
  readonly isRequestTooLargeError = true;

  constructor(
    /** The limit the body went over, in bytes. */
    readonly limit: number,
  ) {
    super(`request body larger than ${limit} bytes`);
    this.name = 'RequestTooLargeError';
  }
}

/** Whether `error` is a {@link RequestTooLargeError}. */
export function isRequestTooLargeError(error: unknown): error is RequestTooLargeError {
  return typeof error === 'object' && error !== null && 'isRequestTooLargeError' in error;
}

/** The answer to a request whose body went over `limit`: `413 request_too_large`. */
export function requestTooLargeResponse(limit: number): HttpResponseData {
  return problemResponse('request_too_large', {
    detail: `This endpoint takes request bodies of at most ${limit} bytes with an idempotency key.`,
  });
}

// Bodies this module read, by request: a second middleware on the same request (`app.use(idem)` and
// `idem.route()` on the route) fingerprints the same bytes, whereas the stream would now look read.
const read = new WeakMap<IncomingMessage, Buffer>();

/**
 * Whether `req` carries a body that nobody has started to read (as body-parser asks: a
 * `Transfer-Encoding`, or a `Content-Length` other than 0). A stream already read, flowing, paused or
 * decoding text belongs to someone else and is left alone.
 */
export function hasUnreadBody(req: IncomingMessage): boolean {
  if (read.has(req)) return true;
  return (
    announcesBody(req) &&
    req.readableFlowing === null &&
    !req.readableDidRead &&
    !req.readableEnded &&
    req.readableEncoding === null
  );
}

/** Whether `req` says it carries a body: a `Transfer-Encoding`, or a `Content-Length` other than 0. */
export function announcesBody(req: IncomingMessage): boolean {
  const length = req.headers['content-length'];
  return (
    req.headers['transfer-encoding'] !== undefined ||
    (length !== undefined && length !== '' && Number(length) !== 0)
  );
}

/**
 * Read the unread body of `req` (see {@link hasUnreadBody}), at most `limit` bytes, and give the bytes
 * back to the stream for whoever reads it next.
 * @throws (rejects with) RequestTooLargeError past `limit` (a `Content-Length` over it is refused without
 *   reading: Node discards the body once the response is sent), or the stream's error when the client
 *   goes away mid-body.
 */
export function readUnreadBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  const done = read.get(req);
  if (done !== undefined) return Promise.resolve(done);
  if (Number(req.headers['content-length']) > limit) {
    return Promise.reject(new RequestTooLargeError(limit));
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let settled = false;
    const settle = (error: Error | undefined) => {
      if (settled) return;
      settled = true;
      req.off('readable', pull);
      req.off('error', failed);
      req.off('close', closed);
      if (error !== undefined) {
        // Read, then discarded: nobody will want the rest (as body-parser does with a body it refuses).
        req.resume();
        reject(error);
        return;
      }
      const body = Buffer.concat(chunks, size);
      // Before 'end': the stream stays readable, and emits 'end' once its next reader has these bytes.
      if (size > 0) req.unshift(body);
      read.set(req, body);
      resolve(body);
    };
    // The connection reset (Node's 'aborted' error) or closed before the whole message arrived: the
    // client went away.
    const failed = (cause: Error) => settle(abortedError(cause));
    const closed = () => (req.complete ? pull() : settle(abortedError(undefined)));
    // Reads exactly what is buffered: a `read()` past the end would schedule 'end', after which the
    // bytes could no longer be given back. `complete`: the parser has seen the whole message and pushed
    // its end, so nothing more will come.
    function pull(): void {
      while (req.readableLength > 0) {
        const chunk = req.read(req.readableLength) as Buffer | null;
        if (chunk === null) break;
        chunks.push(chunk);
        size += chunk.byteLength;
        if (size > limit) {
          settle(new RequestTooLargeError(limit));
          return;
        }
      }
      if (req.complete) settle(undefined);
    }
    req.on('error', failed);
    req.on('close', closed);
    if (req.complete && req.readableLength === 0) settle(undefined);
    else req.on('readable', pull);
  });
}

/** The error of a client that went away mid-body, named as raw-body names it, for the app's error handler. */
export function abortedError(cause: Error | undefined): Error {
  return Object.assign(new Error('request aborted', { cause }), {
    status: 400,
    expose: true,
    code: 'ECONNABORTED',
    type: 'request.aborted',
  });
}
