/**
 * A `c.res` a middleware before the layer set before calling `next()`: a default answer it means the
 * handler to replace. Setting `c.res` marks Hono's context finalized, and Hono then sets no response
 * returned after it on `c.res`: the handler's answer, and the layer's own (a replay, a problem), were
 * dropped for that default, which the layer stored in the handler's place (a 200 default replayed to every
 * retry, a 5xx one releasing the key of a handler that had charged, so the retry charged again, a handler
 * that answered nothing stored as having answered). While the layer runs the context is not finalized, so
 * Hono sets what the handler returns on `c.res`, merging the earlier response's headers into it as it
 * merges those of `c.header`; after the handler, `c.finalized` tells whether it answered. A handler that
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
  // Hono's `c.header()` copies a finalized `c.res` before changing its headers (those of a `fetch()`
  // result are immutable); once un-finalized it would not, and the handler's `c.header()` would throw.
  // Copied now, as it would be (a body already read cannot be: Hono does not copy it either).
  if (!earlier.bodyUsed) c.res = earlier;
  c.finalized = false;
  return {
    putBack: () => {
      c.finalized = true;
    },
  };
}
