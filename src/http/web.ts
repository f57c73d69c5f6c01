/**
 * Capture and build fetch-API `Response`s, shared by the `fetch` and `hono` adapters.
 * @module
 */
import { collectBody } from './capture.js';
import type { Execution } from './execution.js';
import type { HttpResponseData } from './problem.js';

// Statuses whose responses must have no body (the Response constructor refuses one).
const NULL_BODY = new Set([101, 103, 204, 205, 304]);

/** A framework-neutral response as a fetch `Response`. */
export function toWebResponse(data: HttpResponseData): Response {
  const headers = new Headers();
  for (const [name, value] of data.headers) headers.append(name, value);
  const body = NULL_BODY.has(data.status) ? null : data.body;
  return new Response(body as ConstructorParameters<typeof Response>[0], {
    status: data.status,
    headers,
  });
}

/** What {@link captureWebResponse} gives back. */
export interface WebCaptureResult {
  /** The response to send to the client (the body is re-created; headers and status are the same). */
  response: Response;
}

async function* iterate(body: ReadableStream<Uint8Array>): AsyncGenerator<Uint8Array> {
  const reader = body.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      yield value;
    }
  } finally {
    reader.releaseLock();
  }
}

/**
 * Read the handler's response body (up to `maxBodyBytes`), hand it to the execution and wait until it is
 * stored, then return the response to send. Nothing reaches the client before the outcome is durable, so
 * an immediate retry gets the replay, not a 409. A body over the limit is streamed through unbuffered and
 * marked as not kept.
 */
export async function captureWebResponse(
  response: Response,
  execution: Execution,
): Promise<Response> {
  const headers = [...response.headers];
  const init = {
    status: response.status,
    statusText: response.statusText,
    headers: response.headers,
  };
  if (response.body === null) {
    await execution.finish({ status: response.status, headers, body: new Uint8Array(0), bytes: 0 });
    return response;
  }
  let collected: Awaited<ReturnType<typeof collectBody>>;
  try {
    collected = await collectBody(iterate(response.body), execution.policy.maxBodyBytes);
  } catch (error) {
    // The body stream failed before it was complete: nothing valid was produced, so release the key.
    await execution.fail(error);
    throw error;
  }
  if (collected.complete) {
    const body = collected.body;
    await execution.finish({ status: response.status, headers, body, bytes: body.byteLength });
    return new Response(
      NULL_BODY.has(response.status) ? null : (body as ConstructorParameters<typeof Response>[0]),
      init,
    );
  }
  await execution.finish({
    status: response.status,
    headers,
    body: undefined,
    bytes: collected.bytes,
  });
  const { head, rest } = collected;
  const stream = new ReadableStream<Uint8Array>({
    pull: async (controller) => {
      const chunk = head.shift();
      if (chunk !== undefined) return controller.enqueue(chunk);
      const next = await rest.next();
      if (next.done) controller.close();
      else controller.enqueue(next.value);
    },
    cancel: async () => {
      await rest.return?.();
    },
  });
  return new Response(stream, init);
}
