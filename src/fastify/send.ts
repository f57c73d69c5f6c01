/**
 * Sending an answer the layer made (a replay, a problem document) on a Fastify reply: the plugin's and
 * `transactionalRoute`'s, so that both answer alike.
 * @module
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { eachHeaderName } from '../http/header-values.js';
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
  // Each name once, with all its values, in place of what the reply had: appended to it, a Cache-Control
  // an onRequest hook sets on every reply went out twice on each replay (`no-store` beside the handler's
  // `private, max-age=60`, which had replaced it on the first response).
  eachHeaderName(headers, (name, value) => reply.header(name, value));
  // Only a browser's cross-origin request carries Origin: any other request skips the CORS look-up.
  if (request.headers.origin !== undefined) {
    const expose = exposedLayerHeaders(data, (name) => reply.getHeader(name));
    if (expose !== undefined) reply.header('access-control-expose-headers', expose);
  }
  return reply.send(body.byteLength === 0 ? undefined : Buffer.from(body));
}
