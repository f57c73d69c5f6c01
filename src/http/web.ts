/**
 * Read fetch-API `Request` bodies for the fingerprint, and capture and build `Response`s: shared by the
 * `fetch` and `hono` adapters.
 * @module
 */
import type { Decision, Execution } from './execution.js';
import { keepContentEncoding, readAllowedHeaders } from './headers.js';
import type { HttpResponseData } from './problem.js';
import { BodyRelay, bytesOf, type ChunkSource, ENDED_SOURCE } from './stream-relay.js';
import {
  isRequestTooLargeError,
  RequestTooLargeError,
  requestTooLargeResponse,
} from './unread-body.js';

// A Content-Length as an HTTP parser accepts it: digits only.
const LENGTH = /^\d{1,15}$/;

/**
 * The body of a web request for the fingerprint, when its `Content-Length` announces it: refused without
 * reading anything over `limit` (`requestBodyLimit`), else read whole with `whole`, the adapter's own fast
 * path (the HTTP framing stops the body at the length announced). `undefined` without a valid
 * `Content-Length` (a chunked body): read it with {@link readBodyUpTo}.
 * @param whole - Reads the whole body (a clone's `arrayBuffer()`, Hono's cached one).
 * @throws (rejects with) RequestTooLargeError past `limit`, or what reading the body throws.
 */
export function announcedBody(
  contentLength: string | null | undefined,
  limit: number,
  whole: () => Promise<ArrayBuffer>,
): Promise<Uint8Array> | undefined {
  if (typeof contentLength !== 'string' || !LENGTH.test(contentLength)) return undefined;
  if (Number(contentLength) > limit) return Promise.reject(new RequestTooLargeError(limit));
  return whole().then((buffer) => {
    // A runtime that does not hold the body to its Content-Length still gets no larger one through.
    if (buffer.byteLength > limit) throw new RequestTooLargeError(limit);
    return new Uint8Array(buffer);
  });
}

/**
 * A body of unknown length (chunked) for the fingerprint: read chunk by chunk, and refused once it goes
 * over `limit`, the rest left unread with the request (the server discards it, as it does any body no
 * handler reads) instead of held in memory. `body` is `null` for none (zero bytes).
 * @throws (rejects with) RequestTooLargeError past `limit`, or the stream's error.
 */
export function readBodyUpTo(
  body: ReadableStream<Uint8Array> | null,
  limit: number,
): Promise<Uint8Array> {
  return body === null ? Promise.resolve(new Uint8Array(0)) : readUpTo(body, limit);
}

// Released either way, the lock, so that nothing is cancelled: cancelling a request's body would destroy
// its connection before the 413 goes out.
async function readUpTo(body: ReadableStream<Uint8Array>, limit: number): Promise<Uint8Array> {
  const reader = body.getReader();
  try {
    const { head, bytes } = await readHead(reader, limit);
    if (bytes > limit) throw new RequestTooLargeError(limit);
    return head.length === 1 ? head[0]! : Buffer.concat(head, bytes);
  } finally {
    reader.releaseLock();
  }
}

/**
 * Read `reader` to its end, or until past `limit` bytes: the chunks read, and their size. With the stream's
 * own reader, no async iterator in between: one promise per chunk.
 */
async function readHead(
  reader: ReadableStreamDefaultReader<Uint8Array>,
  limit: number,
): Promise<{ head: Uint8Array[]; bytes: number }> {
  const head: Uint8Array[] = [];
  let bytes = 0;
  for (;;) {
    const next = await reader.read();
    if (next.done) break;
    head.push(next.value);
    bytes += next.value.byteLength;
    if (bytes > limit) break;
  }
  return { head, bytes };
}

/**
 * The answer to a request whose body {@link announcedBody} or {@link readBodyUpTo} refused: `413 request_too_large`, as a decision the
 * adapter sends like any other answer of the layer's.
 * @throws `error` itself when it is anything else.
 */
export function tooLargeDecision(error: unknown): Decision {
  if (!isRequestTooLargeError(error)) throw error;
  return { action: 'respond', response: requestTooLargeResponse(error.limit) };
}

/** A read of a response body's stream. */
type ReadableStreamReadResult = Awaited<
  ReturnType<ReadableStreamDefaultReader<Uint8Array>['read']>
>;

// Statuses whose responses must have no body (the Response constructor refuses one).
const NULL_BODY = new Set([101, 103, 204, 205, 304]);

/**
 * The body of a framework-neutral response as a fetch `Response` takes it: `null` for a status that has
 * none and for an empty one. An empty array is a body to `@hono/node-server`, which then sends its default
 * `Content-Type: text/plain; charset=UTF-8`: a replay of a `201` with only a Location, or of a redirect,
 * would carry a type the first response did not.
 */
export function webBody(data: HttpResponseData): Uint8Array<ArrayBuffer> | null {
  return NULL_BODY.has(data.status) || data.body.byteLength === 0
    ? null
    : (data.body as Uint8Array<ArrayBuffer>);
}

/** A framework-neutral response as a fetch `Response`. */
export function toWebResponse(data: HttpResponseData): Response {
  // Pairs, not a Headers object: a repeated name is appended, and a lightweight Response (Hono's
  // node-server) keeps them as they are until they are written.
  return new Response(webBody(data), { status: data.status, headers: data.headers });
}

/** What {@link captureWebResponse} gives back. */
export interface WebCaptureResult {
  /** The response to send to the client (the body is re-created; headers and status are the same). */
  response: Response;
}

/**
 * The body of a lightweight `Response` from `@hono/node-server`, when it is plain text or bytes. That class
 * keeps `[status, body, headers]` under a private symbol and builds a full fetch Response, with a stream,
 * only when its body is read; reading the bytes from there instead costs nothing, and the response is then
 * sent as it is. `undefined` for any other response (read through its stream, as before).
 */
function plainBody(response: Response): Uint8Array | undefined {
  for (const symbol of Object.getOwnPropertySymbols(response)) {
    if (symbol.description !== 'cache') continue;
    const cache = (response as unknown as Record<symbol, unknown>)[symbol];
    if (!Array.isArray(cache) || cache.length !== 3 || cache[0] !== response.status)
      return undefined;
    const body: unknown = cache[1];
    if (body === null) return new Uint8Array(0);
    if (typeof body === 'string') return Buffer.from(body, 'utf8');
    if (body instanceof Uint8Array) return body;
    return undefined;
  }
  return undefined;
}

/**
 * Capture the handler's response: its status, allowed headers and body, handed to the execution, and the
 * response to send. A body whose bytes are all at hand (plain text or bytes, a `Response` made from them)
 * is stored before the response is returned, as it always was. A body still being produced (a stream: a
 * Server-Sent Events route, a long generated answer) goes out chunk by chunk as the handler produces it,
 * captured on the way up to `maxBodyBytes`, and only its end is held until the outcome is stored
 * (`./stream-relay.ts`): either way an immediate retry gets the replay, not a 409.
 *
 * Whatever fails before the outcome is handed over releases the key and is rethrown: a body that cannot be
 * read (already read, or locked by a reader the handler took), a handler that returned something other
 * than a `Response`, a body stream that errors before anything of it went out. A body stream that errors
 * later is judged by the status the handler answered with (`Execution.bodyFailed`, `./stream-relay.ts`). Left alone, the claim would stay in progress, its lease
 * extended while the process lives, and every retry would get 409.
 * @param dropped - The framework dropped this answer for another that went out (Hono's, behind a timeout):
 *   a body stream that fails at once is judged by its status, not released.
 */
export async function captureWebResponse(
  response: Response,
  execution: Execution,
  dropped = false,
): Promise<Response> {
  try {
    return await capture(response, execution, dropped);
  } catch (error) {
    await execution.fail(error); // nothing once the outcome was handed over (`fail` is then a no-op)
    throw error;
  }
}

async function capture(
  response: Response,
  execution: Execution,
  dropped: boolean,
): Promise<Response> {
  // A Headers object joins a repeated name's values, as iterating it does.
  const headers = readAllowedHeaders(execution.policy.replayHeaders, (name) =>
    response.headers.get(name),
  );
  // The Response is what the handler (and what runs inside the layer) produced: its encoding is its body's.
  keepContentEncoding(headers, response.headers.get('content-encoding'));
  const plain = plainBody(response);
  if (plain !== undefined) {
    const kept = plain.byteLength <= execution.policy.maxBodyBytes ? plain : undefined;
    await execution.finish({
      status: response.status,
      headers,
      body: kept,
      bytes: plain.byteLength,
    });
    return response;
  }
  const init = {
    status: response.status,
    statusText: response.statusText,
    headers: response.headers,
  };
  if (response.body === null) {
    await execution.finish({ status: response.status, headers, body: new Uint8Array(0), bytes: 0 });
    return response;
  }
  const reader = response.body.getReader();
  let whole: Awaited<ReturnType<typeof readWhole>>;
  try {
    whole = await readWhole(reader, execution.policy.maxBodyBytes);
  } catch (error) {
    // The body stream failed at once, before anything of it went out: the server answers the error in its
    // place, so the key is released, as for a thrown error (`./stream-relay.ts`). Not for an answer the
    // framework dropped for another that went out (`dropped`: Hono's behind a timeout): no client waits
    // for it, and the handler answered, so it is judged by its status.
    if (dropped) await execution.bodyFailed(response.status, error);
    else await execution.fail(error);
    throw error;
  }
  if (whole instanceof Uint8Array) {
    await execution.finish({
      status: response.status,
      headers,
      body: whole,
      bytes: whole.byteLength,
    });
    return new Response(
      NULL_BODY.has(response.status) ? null : (whole as ConstructorParameters<typeof Response>[0]),
      init,
    );
  }
  // Relayed: the head goes out now, with the handler's own headers (no Content-Length is made up for a
  // body of unknown length), and the same status and headers are what is stored.
  const relay = new BodyRelay(
    execution,
    { status: response.status, headers },
    whole.source,
    whole.head,
  );
  return new Response(relayedStream(relay), init);
}

/** A body still being produced (or larger than kept): the source to relay, and the chunks read from it. */
export interface StreamRest {
  source: ChunkSource;
  head: Uint8Array[];
}

/** What {@link readAvailable} read: the chunks, and whether the body ended within them. */
interface Available {
  head: Uint8Array[];
  bytes: number;
  /** The body ended (`done`), or a read is still pending (`pending`, to be read on from). */
  done: boolean;
  pending?: Promise<ReadableStreamReadResult>;
}

/**
 * A body whose bytes are all at hand, whole (at most `limit` bytes): one chunk (the common case) is the
 * stream's own copy of the bytes, kept as it is. Otherwise what to make the relay of.
 * @throws (rejects with) the stream's error (the lock is released first).
 */
export async function readWhole(
  reader: ReadableStreamDefaultReader<Uint8Array>,
  limit: number,
): Promise<Uint8Array | StreamRest> {
  let available: Available;
  try {
    available = await readAvailable(reader, limit);
  } catch (error) {
    reader.releaseLock();
    throw error;
  }
  const { head, bytes, done, pending } = available;
  if (done && bytes <= limit) {
    reader.releaseLock();
    return head.length === 1 ? head[0]! : Buffer.concat(head, bytes);
  }
  return { source: done ? ENDED_SOURCE : readerSource(reader, pending), head };
}

/**
 * Read the chunks `reader` has at hand, without waiting for one that is not: until the body ends, a read
 * would wait, or more than `limit` bytes were read. A `Response` made from bytes or text has them all at
 * hand (one chunk, then its end); a stream still being written has not.
 */
async function readAvailable(
  reader: ReadableStreamDefaultReader<Uint8Array>,
  limit: number,
): Promise<Available> {
  const head: Uint8Array[] = [];
  let bytes = 0;
  for (;;) {
    const pending = reader.read();
    const next = await unlessWaiting(pending);
    if (next === undefined) return { head, bytes, done: false, pending };
    if (next.done) return { head, bytes, done: true };
    // Strings, which Node servers send as UTF-8, are counted and stored as those bytes, as the relay does:
    // a string has no byteLength, and the store cannot encode one as a body.
    const chunk = bytesOf(next.value);
    head.push(chunk);
    bytes += chunk.byteLength;
    if (bytes > limit) return { head, bytes, done: false };
  }
}

/**
 * `read`'s result if it has one at once, else `undefined`: a read of a chunk (or an end) already queued
 * settles within a few microtasks (a `Response` from bytes closes its stream in one), where a stream still
 * waiting for its producer does not. The same test @hono/node-server makes before it sends a body.
 */
function unlessWaiting<T>(read: Promise<T>): Promise<T | undefined> {
  return Promise.race([read, Promise.resolve().then(() => Promise.resolve(undefined))]);
}

/** A web stream's reader as a relay's source; `pending`: a read made already, to be answered first. */
function readerSource(
  reader: ReadableStreamDefaultReader<Uint8Array>,
  pending: Promise<ReadableStreamReadResult> | undefined,
): ChunkSource {
  let first = pending;
  return {
    read: () => {
      const read = first ?? reader.read();
      first = undefined;
      return read;
    },
    stop: (reason) => {
      reader.cancel(reason).catch(() => {});
    },
  };
}

/**
 * Relays whose stream was garbage-collected: thrown away unread by something after the layer (an outer
 * fetch wrapper or Hono middleware that answered another `Response`), the server never read it to its end.
 * Abandoned as for a client that left, so that the relay reads the handler's stream itself and stores it;
 * left alone, the key would stay in progress until `maxExecution`. Best effort: when (and whether) the
 * collector runs is up to the engine. The relay must never reference its stream, or the stream would never
 * be collected. Holds the relay only while its stream lives; a no-op for a relay that is over. A runtime
 * without `FinalizationRegistry` (none of those the adapters name) only goes without this net.
 */
const unreadRelays =
  typeof FinalizationRegistry === 'function'
    ? new FinalizationRegistry<BodyRelay>((relay) => relay.abandon(undefined))
    : undefined;

/**
 * The relay as the web stream the server reads: a chunk per read asked for (no read-ahead, as a Node
 * response takes each `write`), the end once the outcome is stored, the error of a stream that failed
 * (the server then cuts the response), and the server's cancel when the client went away.
 */
function relayedStream(relay: BodyRelay): ReadableStream<Uint8Array> {
  let cancelled = false;
  const stream = new ReadableStream<Uint8Array>(
    {
      pull: async (controller) => {
        let chunk: Uint8Array | null;
        try {
          chunk = await relay.next();
        } catch (error) {
          unreadRelays?.unregister(relay);
          throw error;
        }
        // Cancelled while the read was in flight: the chunk was captured, there is no one to send it to.
        if (cancelled) return;
        if (chunk === null) {
          unreadRelays?.unregister(relay);
          controller.close();
        } else controller.enqueue(chunk);
      },
      cancel: (reason) => {
        cancelled = true;
        unreadRelays?.unregister(relay);
        relay.abandon(reason);
      },
    },
    { highWaterMark: 0 },
  );
  unreadRelays?.register(stream, relay, relay);
  return stream;
}
