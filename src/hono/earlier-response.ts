/**
 * A `c.res` a middleware before the layer set before calling `next()`: a default answer it means the
 * handler to replace. Setting `c.res` marks Hono's context finalized, and Hono then sets no response
 * returned after it on `c.res`: the handler's answer, and the layer's own (a replay, a problem), were
 * dropped for that default, which the layer stored in the handler's place (a 200 default replayed to every
 * retry, a 5xx one releasing the key of a handler that had charged, so the retry charged again, a handler
 * that answered nothing stored as having answered). While the layer runs the context is not finalized, so
 * Hono sets what the handler returns on `c.res`, with the earlier response's headers that are not about
 * its own body carried as `c.header` carries them, under the handler's own (also to a `Response` the
 * handler built itself, which Hono takes as it is: `carry`); after the handler, `c.finalized` tells
 * whether it answered. A handler that answered nothing leaves the earlier response in place: it goes out,
 * as without the layer, unstored.
 * @module
 */
import type { Context } from 'hono';

/**
 * What {@link setAsideEarlierResponse} returns: the earlier response put back when nothing replaced it, and
 * its headers carried to a `Response` the handler built itself.
 */
export interface EarlierResponse {
  /**
   * Finalize the context again once the handler has run, so that an earlier response nothing replaced
   * goes out, as without the layer (Hono would otherwise answer 500, "Context is not finalized"). A no-op
   * when the handler answered.
   */
  putBack(): void;
  /**
   * `response` with the earlier response's carried headers it does not set itself, and its cookies beside
   * its own: for a `Response` the handler returned as it is (no `c` helper, which builds on the headers
   * `c.header` carried), which Hono sets on `c.res` without them. Without the layer the client got those
   * headers (a CORS header, a session cookie) on the earlier response: with it, it gets them on the
   * handler's answer, whichever way it was built. Absent when no earlier response was set aside.
   */
  carry?: (response: Response) => Response;
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
  const carried = carriedHeaders(earlier.headers);
  for (const [name, value] of carried) c.header(name, value, { append: name === 'set-cookie' });
  return {
    putBack: () => {
      c.res = earlier;
    },
    carry: (response) => (response === earlier ? response : withHeaders(response, carried)),
  };
}

// The earlier response's headers that are not about its own body, each cookie on its own.
function carriedHeaders(headers: Headers): Array<[string, string]> {
  const carried: Array<[string, string]> = [];
  for (const [name, value] of headers) {
    // Cookies once, below: iterating `Headers` yields each cookie on its own, and each pass took all of
    // them (two cookies went out four times).
    if (REPRESENTATION_HEADERS.has(name) || name === 'set-cookie') continue;
    carried.push([name, value]);
  }
  for (const cookie of headers.getSetCookie()) carried.push(['set-cookie', cookie]);
  return carried;
}

// `response` with each of `carried` it lacks (a cookie it does not set already), under its own.
function withHeaders(response: Response, carried: Array<[string, string]>): Response {
  const missing = carried.filter(([name, value]) =>
    name === 'set-cookie'
      ? !response.headers.getSetCookie().includes(value)
      : !response.headers.has(name),
  );
  if (missing.length === 0) return response;
  try {
    for (const [name, value] of missing) response.headers.append(name, value);
    return response;
  } catch {
    // Immutable headers (a `fetch()` result, `Response.redirect`): a copy around the same body, as Hono's
    // `c.res` setter makes one. A body already read cannot be wrapped again: sent as it is.
    if (response.bodyUsed) return response;
    const copy = new Response(response.body, response);
    for (const [name, value] of missing) copy.headers.append(name, value);
    return copy;
  }
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
