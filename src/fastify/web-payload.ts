/**
 * Fetch-API payloads in `onSend`: Fastify 5 sends a `Response` (its status, headers and body) and a web
 * `ReadableStream` as it sends a Node stream, and hands both to `onSend` hooks as they were returned.
 * Fastify applies a `Response`'s status and headers only *after* the `onSend` hooks, so the capture must
 * apply them itself to see the status and headers that go out (read before, a `Response` of 201 or 500
 * looked like a 200, and its body, having no `byteLength`, like one too large to keep).
 * @module
 */
import type { FastifyReply } from 'fastify';

/** A fetch `Response` (checked by its tag, as Fastify does: another realm's `Response` counts too). */
export function isWebResponse(payload: unknown): payload is Response {
  return (
    typeof payload === 'object' &&
    payload !== null &&
    Object.prototype.toString.call(payload) === '[object Response]'
  );
}

/** A web `ReadableStream` (what Fastify recognises by `getReader`). */
export function isWebStream(payload: unknown): payload is ReadableStream<Uint8Array> {
  return (
    typeof payload === 'object' &&
    payload !== null &&
    typeof (payload as ReadableStream).getReader === 'function'
  );
}

/**
 * Apply a `Response` payload's status and headers to `reply`, as Fastify would after the `onSend` hooks,
 * and return its body (`null` or a web stream) as the payload to capture. Once the capture has replaced
 * the payload with the bytes, Fastify no longer sees a `Response`, so nothing is applied twice (a
 * `Set-Cookie` would be, since `reply.header` appends those).
 * @throws Error when the body was already read (Fastify refuses it too: FST_ERR_REP_RESPONSE_BODY_CONSUMED).
 */
export function unwrapWebResponse(
  reply: FastifyReply,
  response: Response,
): ReadableStream<Uint8Array> | null {
  if (response.body !== null && response.bodyUsed) {
    throw Object.assign(new Error('Response.body is already used'), {
      code: 'FST_ERR_REP_RESPONSE_BODY_CONSUMED',
      statusCode: 500,
    });
  }
  reply.code(response.status);
  for (const [name, value] of response.headers) reply.header(name, value);
  return response.body;
}
