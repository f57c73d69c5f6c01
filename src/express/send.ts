/**
 * Sending an answer the layer made (a replay, a problem document) on an Express response: the middleware's
 * and `transactionalRoute`'s, so that both answer alike.
 * @module
 */
import type { Request, Response } from 'express';
import { bufferView } from '../core/bytes.js';
import { exposedLayerHeaders, type HttpResponseData } from '../http/index.js';

/**
 * Write `data` on `res`: the status, each header through Node's `setHeader` (a repeated name with all its
 * values; Express's `set` would add a charset to a content-type), the layer's headers exposed to a
 * cross-origin caller, then the body.
 */
export function send(req: Request, res: Response, data: HttpResponseData): void {
  res.statusCode = data.status;
  const headers = data.headers;
  for (let i = 0; i < headers.length; i++) {
    const [name, value] = headers[i]!;
    if (seenBefore(headers, name, i)) continue; // set with its first value, below
    let values: string[] | undefined;
    for (let j = i + 1; j < headers.length; j++) {
      const [other, more] = headers[j]!;
      if (other !== name) continue;
      values ??= [value];
      values.push(more);
    }
    res.setHeader(name, values ?? value);
  }
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

function seenBefore(headers: ReadonlyArray<readonly [string, string]>, name: string, i: number) {
  for (let j = 0; j < i; j++) if (headers[j]![0] === name) return true;
  return false;
}
