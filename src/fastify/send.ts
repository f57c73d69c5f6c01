/**
 * Sending an answer the layer made (a replay, a problem document) on a Fastify reply: the plugin's and
 * `transactionalRoute`'s, so that both answer alike.
 * @module
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { exposedLayerHeaders, type HttpResponseData } from '../http/index.js';

/**
 * Send `data` on `reply`: the status, its headers (a name the reply has already gets the value beside its
 * own), the layer's headers exposed to a cross-origin caller, then the body's bytes (none when empty).
 */
export function sendAnswer(
  request: FastifyRequest,
  reply: FastifyReply,
  data: HttpResponseData,
): FastifyReply {
  const { status, headers, body } = data;
  reply.code(status);
  for (const [name, value] of headers) {
    const existing = reply.getHeader(name);
    reply.header(name, existing === undefined ? value : [existing, value].flat().map(String));
  }
  // Only a browser's cross-origin request carries Origin: any other request skips the CORS look-up.
  if (request.headers.origin !== undefined) {
    const expose = exposedLayerHeaders(data, (name) => reply.getHeader(name));
    if (expose !== undefined) reply.header('access-control-expose-headers', expose);
  }
  return reply.send(body.byteLength === 0 ? undefined : Buffer.from(body));
}
