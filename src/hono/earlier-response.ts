/**
 * A `c.res` a middleware before the layer set before calling `next()`: a default answer it means the
 * handler to replace. Setting `c.res` marks Hono's context finalized, and Hono then sets no response
 * returned after it on `c.res`: the handler's answer, and the layer's own (a replay, a problem), were
 * dropped for that default, which the layer stored in the handler's place (a 200 default replayed to every
 * retry, a 5xx one releasing the key of a handler that had charged, so the retry charged again, a handler
 * that answered nothing stored as having answered). While the layer runs the context is not finalized, so
 * Hono sets what the handler returns on `c.res`, with the earlier response's headers that are not about
 * its own body carried as `c.header` carries them, under the handler's own; after the handler,
 * `c.finalized` tells whether it answered. A handler that
 * answered nothing leaves the earlier response in place: it goes out, as without the layer, unstored.
 * @module
 */
import type { Context } from 'hono';

/** What {@link setAsideEarlierResponse} returns: the earlier response put back when nothing replaced it. */
export interface EarlierResponse {
  /**
   * Finalize the context again once the handler has run, so that an earlier response nothing replaced
   * goes out, as without the layer (Hono would otherwise answer 500, "Context is not finalized"). A no-op
   * when the handler answered.
   */
  putBack(): void;
}

const NOTHING: EarlierResponse = { putBack: () => {} };

/**
 * Un-finalize `c` when a middleware before the layer set `c.res`, so that only what is produced under the
 * layer reaches `c.res` and counts as the answer (see the module). Call before watching the handler.
 */
export function setAsideEarlierResponse(c: Context): EarlierResponse {
  if (!c.finalized) return NOTHING;
  const earlier = c.res;
  // Out of Hono's `c.res`: left there, Hono copies every header of it (Content-Length, Location,
  // Cache-Control, ...) over the response set after it, and the handler's 201 went out, and was replayed,
  // cut to the earlier body's length. Its other headers (a CORS header, a request id, a cookie) are carried
  // as `c.header` carries them: under the handler's own.
  c.res = undefined;
  c.finalized = false;
  for (const [name, value] of earlier.headers) {
    if (REPRESENTATION_HEADERS.has(name)) continue;
    if (name === 'set-cookie') {
      for (const cookie of earlier.headers.getSetCookie()) c.header(name, cookie, { append: true });
    } else c.header(name, value);
  }
  return {
    putBack: () => {
      c.res = earlier;
    },
  };
}

// Headers that describe the earlier response's own body or framing: never carried to another answer.
const REPRESENTATION_HEADERS: ReadonlySet<string> = new Set([
  'content-type',
  'content-length',
  'content-encoding',
  'content-range',
  'content-location',
  'content-disposition',
  'transfer-encoding',
  'etag',
  'last-modified',
  'location',
  'cache-control',
  'expires',
  'vary',
]);
