/**
 * The JSON text of a request, kept while Fastify parses it. Fastify's JSON parser reads numbers as
 * doubles, so `{"account":9223372036854775807}` and `{"account":9223372036854775806}` reach the layer as one
 * value; with the text the fingerprint reads them exactly, and a key reused for the other account is 422
 * instead of a replay of the first account's response (see `src/http/json-numbers.ts`).
 * @module
 */
import { type Readable, Transform } from 'node:stream';
import type { FastifyRequest } from 'fastify';

/** The text kept per request; a WeakMap rather than a request property, so requests keep one shape. */
const texts = new WeakMap<FastifyRequest, Buffer>();

/**
 * A stream that passes `payload` on to Fastify's body parser unchanged and, once it has ended, keeps the
 * bytes for {@link jsonTextOf}. A stream of its own rather than a second `data` listener on `payload`: a
 * listener would start the flow before the parser listens when a later hook is asynchronous, and pausing
 * the request would hang a parser that listens without resuming. Backpressure bounds what it holds: a
 * parser that stops reading (Fastify past `bodyLimit`) stops it too.
 */
export function keepJsonText(request: FastifyRequest, payload: Readable): Readable {
  const chunks: Buffer[] = [];
  const tee = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      chunks.push(chunk);
      callback(null, chunk);
    },
    flush(callback) {
      // A copy: the parser gets the chunks too, and may be handed views of the socket's buffer.
      texts.set(request, Buffer.concat(chunks));
      callback();
    },
  });
  // A preParsing hook before this one that decodes the body (gzip) reports the bytes it read: Fastify
  // compares those with content-length and bodyLimit.
  const encoded = payload as Readable & { receivedEncodedLength?: number };
  if (encoded.receivedEncodedLength !== undefined) {
    Object.defineProperty(tee, 'receivedEncodedLength', {
      get: () => encoded.receivedEncodedLength,
    });
  }
  // A client that goes away mid-body: the request's error goes on to whoever reads this stream (Fastify's
  // parser answers 400). A listener of our own keeps it from being uncaught when the reader is a later
  // hook's stream that does not listen for errors (the request itself emits none without a listener).
  // Not `pipeline`: it costs some 40 µs of CPU per request on Node 20.
  payload.once('error', (error) => tee.destroy(error));
  tee.on('error', ignoreError);
  return payload.pipe(tee);
}

// Whoever reads the stream handles the error (Fastify answers 400); the request is gone anyway.
function ignoreError(): void {}

/** The JSON text {@link keepJsonText} kept for `request`, once its body has been read. */
export function jsonTextOf(request: FastifyRequest): Buffer | undefined {
  return texts.get(request);
}
