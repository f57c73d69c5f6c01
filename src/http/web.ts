/**
 * Read fetch-API `Request` bodies for the fingerprint, and capture and build `Response`s: shared by the
 * `fetch` and `hono` adapters.
 * @module
 */
import type { CapturedResponse, Decision, Execution } from './execution.js';
import { keepContentEncoding, readAllowedHeaders } from './headers.js';
import type { HttpResponseData } from './problem.js';
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

// Statuses whose responses must have no body (the Response constructor refuses one).
const NULL_BODY = new Set([101, 103, 204, 205, 304]);

/** A framework-neutral response as a fetch `Response`. */
export function toWebResponse(data: HttpResponseData): Response {
  const body = NULL_BODY.has(data.status) ? null : data.body;
  // Pairs, not a Headers object: a repeated name is appended, and a lightweight Response (Hono's
  // node-server) keeps them as they are until they are written.
  return new Response(body as ConstructorParameters<typeof Response>[0], {
    status: data.status,
    headers: data.headers,
  });
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
 * Read the handler's response body (up to `maxBodyBytes`), hand it to the execution and wait until it is
 * stored, then return the response to send. Nothing reaches the client before the outcome is durable, so
 * an immediate retry gets the replay, not a 409. A body over the limit is streamed through unbuffered,
 * and marked as not kept once it has ended (released if it fails instead).
 *
 * Whatever fails before the outcome is handed over releases the key and is rethrown: a body that cannot be
 * read (already read, or locked by a reader the handler took), a body stream that errors, a handler that
 * returned something other than a `Response`. Left alone, the claim would stay in progress, its lease
 * extended while the process lives, and every retry would get 409.
 */
export async function captureWebResponse(
  response: Response,
  execution: Execution,
): Promise<Response> {
  try {
    return await capture(response, execution);
  } catch (error) {
    await execution.fail(error); // nothing once the outcome was handed over (`fail` is then a no-op)
    throw error;
  }
}

async function capture(response: Response, execution: Execution): Promise<Response> {
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
  const limit = execution.policy.maxBodyBytes;
  const reader = response.body.getReader();
  let head: Uint8Array[];
  let bytes: number;
  try {
    ({ head, bytes } = await readHead(reader, limit));
  } catch (error) {
    reader.releaseLock();
    // The body stream failed before it was complete: nothing valid was produced (the caller releases the
    // key).
    throw error;
  }
  if (bytes <= limit) {
    reader.releaseLock();
    // One chunk (the common case) is the stream's own copy of the bytes: kept as it is.
    const body = head.length === 1 ? head[0]! : Buffer.concat(head);
    await execution.finish({ status: response.status, headers, body, bytes });
    return new Response(
      NULL_BODY.has(response.status) ? null : (body as ConstructorParameters<typeof Response>[0]),
      init,
    );
  }
  return new Response(
    passOn(head, bytes, reader, execution, { status: response.status, headers }),
    init,
  );
}

/**
 * A body over `maxBodyBytes`, sent on as it is read, unbuffered: `head` (`bytes` long) read already, the
 * rest from `reader`. Its outcome is known only at its end, so it is decided there, not when the limit
 * was passed: a stream that ends keeps the `response_too_large` marker, stored before the end goes out
 * (an immediate retry gets the 409 marker, not `in_progress`); one that fails produced no valid response
 * and releases the key, as a thrown error does (a marker would refuse every retry of a payment whose
 * client got a truncated body). The client going away (a cancel) does not stop completion: the marker
 * is kept, since the handler's effects are done.
 */
function passOn(
  head: Uint8Array[],
  bytes: number,
  reader: ReadableStreamDefaultReader<Uint8Array>,
  execution: Execution,
  response: Pick<CapturedResponse, 'status' | 'headers'>,
): ReadableStream<Uint8Array> {
  const marker = () => execution.finish({ ...response, body: undefined, bytes });
  return new ReadableStream<Uint8Array>({
    pull: async (controller) => {
      const chunk = head.shift();
      if (chunk !== undefined) return controller.enqueue(chunk);
      let next: Awaited<ReturnType<typeof reader.read>>;
      try {
        next = await reader.read();
      } catch (error) {
        await execution.fail(error);
        throw error; // errors this stream: the server cuts the response
      }
      if (next.done) {
        reader.releaseLock();
        await marker();
        controller.close();
      } else {
        bytes += next.value.byteLength;
        controller.enqueue(next.value);
      }
    },
    // The client went away: tell the handler's stream, as the server would have without the layer, so
    // that its source stops and frees what it holds (a cursor, a file, an upstream request).
    cancel: (reason) => {
      void marker();
      return reader.cancel(reason);
    },
  });
}
