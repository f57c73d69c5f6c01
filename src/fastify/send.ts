/**
 * Sending an answer the layer made (a replay, a problem document) on a Fastify reply: the plugin's and
 * `transactionalRoute`'s, so that both answer alike.
 * @module
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { exposedLayerHeaders, type HttpResponseData } from '../http/index.js';

/**
 * Send `data` on `reply`: the status, its headers (each name with all its values, in place of a value a
 * hook set on the reply before the layer, as the handler's own `reply.header` replaced it the first time),
 * the layer's headers exposed to a cross-origin caller, then the body's bytes (none when empty).
 */
export function sendAnswer(
  request: FastifyRequest,
  reply: FastifyReply,
  data: HttpResponseData,
): FastifyReply {
  const { status, headers, body } = data;
  reply.code(status);
  // A stored name repeats once per value (two Link lines): its values go out together. Appended to what
  // the reply had, a Cache-Control an onRequest hook sets on every reply went out twice on each replay
  // (`no-store` beside the handler's `private, max-age=60`, which had replaced it on the first response).
  for (let i = 0; i < headers.length; i++) {
    const [name, value] = headers[i]!;
    if (seenBefore(headers, name, i)) continue; // sent with its first value
    let values: string[] | undefined;
    for (let j = i + 1; j < headers.length; j++) {
      const [other, more] = headers[j]!;
      if (other !== name) continue;
      values ??= [value];
      values.push(more);
    }
    reply.header(name, values ?? value);
  }
  // Only a browser's cross-origin request carries Origin: any other request skips the CORS look-up.
  if (request.headers.origin !== undefined) {
    const expose = exposedLayerHeaders(data, (name) => reply.getHeader(name));
    if (expose !== undefined) reply.header('access-control-expose-headers', expose);
  }
  return reply.send(body.byteLength === 0 ? undefined : Buffer.from(body));
}

// Whether `name` is among the pairs before index `i`.
function seenBefore(headers: ReadonlyArray<readonly [string, string]>, name: string, i: number) {
  for (let j = 0; j < i; j++) if (headers[j]![0] === name) return true;
  return false;
}
