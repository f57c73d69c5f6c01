/**
 * Sending an answer the layer made (a replay, a problem document) on an Express response: the middleware's
 * and `transactionalRoute`'s, so that both answer alike.
 * @module
 */
import type { Request, Response } from 'express';
import { bufferView } from '../core/bytes.js';
import { eachHeaderName } from '../http/header-values.js';
import { exposedLayerHeaders, type HttpResponseData } from '../http/index.js';

/**
 * Write `data` on `res`: the status, each header through Node's `setHeader` (a repeated name with all its
 * values; Express's `set` would add a charset to a content-type), the layer's headers exposed to a
 * cross-origin caller, then the body.
 */
export function send(req: Request, res: Response, data: HttpResponseData): void {
  res.statusCode = data.status;
  eachHeaderName(data.headers, (name, value) => res.setHeader(name, value));
  // Only a browser's cross-origin request carries Origin: any other request skips the CORS look-up.
  if (req.headers.origin !== undefined) {
    const expose = exposedLayerHeaders(data, (name) => res.getHeader(name));
    if (expose !== undefined) res.setHeader('access-control-expose-headers', expose);
  }
  const body = data.body;
  // A view, not a copy: nothing writes to stored or problem bodies. A buffer, as Express's own `res.send`
  // hands to `end`, so that a wrapper of `res.end` sees a replay as it saw the first response.
  res.end(body.byteLength === 0 ? undefined : bufferView(body));
}
