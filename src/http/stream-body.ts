/**
 * A body a parser before the layer handed on as a stream: a Fastify content-type parser that calls
 * `done(null, payload)` after a `preParsing` hook replaced the payload (a decompression hook: the stream is
 * then the hook's, and `request.raw` has been read into it), an Express middleware that sets `req.body` to
 * a stream. The handler reads the body from that stream, so the fingerprint must cover its bytes; the
 * stream object itself says nothing of them (its fields are buffers and counters that differ from one
 * request to the next, or not at all).
 *
 * So the layer reads the stream, at most `requestBodyLimit` bytes (over it: 413, as for any body it reads
 * itself), and puts a new stream of the same bytes where the handler reads the body. A stream that has
 * ended cannot take its bytes back (`unshift` fails after `'end'`), hence a new one rather than the same.
 * @module
 */
import type { IncomingMessage } from 'node:http';
import { Readable } from 'node:stream';
import { abortedError, RequestTooLargeError } from './unread-body.js';

/**
 * Whether `body` is a Node readable stream of bytes (not one of objects): a `pipe` and an `on` method. Duck
 * typed, as streams built on the `readable-stream` package are not `instanceof` Node's `Readable`.
 */
export function isStreamBody(body: unknown): body is Readable {
  return (
    typeof body === 'object' &&
    body !== null &&
    typeof (body as Readable).pipe === 'function' &&
    typeof (body as Readable).on === 'function' &&
    (body as Readable).readableObjectMode !== true
  );
}

/** What {@link readStreamBody} read, and the stream to hand to the handler instead. */
export interface StreamBody {
  /** The bytes, for the fingerprint. */
  bytes: Buffer;
  /** A new stream of the same bytes, for the handler. */
  stream: Readable;
}

/**
 * Read `body` whole, at most `limit` bytes.
 * @param request - The request the stream comes from: a client that goes away mid-body ends the read
 *   (a stream fed by `request.pipe()` would otherwise wait for an end that never comes).
 * @throws (rejects with) RequestTooLargeError past `limit` (the stream is then destroyed), the stream's
 *   error, or an `ECONNABORTED` error when the client went away.
 */
export async function readStreamBody(
  body: Readable,
  limit: number,
  request: IncomingMessage,
): Promise<StreamBody> {
  const chunks: Buffer[] = [];
  let size = 0;
  const gone = () => {
    if (!request.complete) body.destroy(abortedError(undefined));
  };
  if (request.destroyed) gone();
  else request.once('close', gone);
  try {
    // Leaving the loop by a throw destroys the stream.
    for await (const chunk of body as AsyncIterable<Buffer | string>) {
      const bytes = typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : chunk;
      size += bytes.byteLength;
      if (size > limit) throw new RequestTooLargeError(limit);
      chunks.push(bytes);
    }
  } finally {
    request.off('close', gone);
  }
  const bytes = Buffer.concat(chunks, size);
  return { bytes, stream: Readable.from(size > 0 ? [bytes] : [], { objectMode: false }) };
}
