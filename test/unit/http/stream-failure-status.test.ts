/**
 * A body stream that fails is judged by the status the handler answered with: the handler's work is done,
 * so a status that would have been stored keeps a `response_not_captured` marker (every retry 409, never a
 * second run), also when the stream fails at once, before anything of it went out; a 5xx releases the key,
 * as a 5xx response does, and the retry runs again. The marker round-trips through the codec with its
 * `cut` flag, and a record without the flag (an older release's) reads as it always did.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { idempotencyOf, withIdempotency } from '../../../src/fetch/index.js';
import { replayResponse } from '../../../src/http/execution.js';
import { httpResponseCodec } from '../../../src/http/response-codec.js';
import { createIdempotency, memoryStore } from '../../../src/index.js';

const post = (key: string, status: number, when: 'at-once' | 'later') =>
  new Request(`http://api.test/charges?status=${status}&when=${when}`, {
    method: 'POST',
    headers: { 'idempotency-key': key },
  });

// A body whose stream errors at once (nothing of it is ever read) or after one chunk.
function failingBody(when: 'at-once' | 'later'): ReadableStream<Uint8Array> {
  let pulls = 0;
  return new ReadableStream<Uint8Array>({
    start(controller) {
      if (when === 'at-once') controller.error(new Error('receipt renderer broke'));
    },
    async pull(controller) {
      if (pulls++ === 0) {
        // Not at hand at once: the adapter relays it instead of reading it whole.
        await new Promise((resolve) => setTimeout(resolve, 5));
        controller.enqueue(new TextEncoder().encode('{"charge":'));
        return;
      }
      controller.error(new Error('receipt renderer broke'));
    },
  });
}

function charges() {
  const runs = new Map<string, number>();
  const handler = withIdempotency(
    async (request: Request) => {
      const key = request.headers.get('idempotency-key') ?? '';
      const run = (runs.get(key) ?? 0) + 1;
      runs.set(key, run);
      const url = new URL(request.url);
      const status = Number(url.searchParams.get('status'));
      const when = url.searchParams.get('when') as 'at-once' | 'later';
      // The first run charges, then answers with a body that fails; a run after a release answers whole.
      if (run > 1) return Response.json({ charge: run }, { status: 201 });
      return new Response(failingBody(when), { status });
    },
    { store: memoryStore() },
  );
  return { handler, runs };
}

// The client's view of the first request: the adapter's rejection, or a response whose body is cut.
async function firstAttempt(handler: (request: Request) => Promise<Response>, request: Request) {
  try {
    const response = await handler(request);
    await expect(response.text()).rejects.toThrow('receipt renderer broke');
  } catch (error) {
    expect((error as Error).message).toBe('receipt renderer broke');
  }
}

describe('a failing response body stream', () => {
  it('keeps a response_not_captured marker for a 200 whose stream fails after a chunk went out: the retry never runs', async () => {
    const { handler, runs } = charges();
    const key = randomUUID();
    await firstAttempt(handler, post(key, 200, 'later'));
    for (let retry = 0; retry < 2; retry++) {
      const response = await handler(post(key, 200, 'later'));
      expect(response.status).toBe(409);
      const problem = (await response.json()) as { code: string; detail: string };
      expect(problem.code).toBe('response_not_captured');
      expect(problem.detail).toMatch(/status 200\) with a body stream that failed/);
    }
    expect(runs.get(key)).toBe(1);
  });

  it('releases the key of a 200 whose stream fails at once, before anything went out: the server answered the error, the retry runs', async () => {
    const { handler, runs } = charges();
    const key = randomUUID();
    await firstAttempt(handler, post(key, 200, 'at-once'));
    const retry = await handler(post(key, 200, 'at-once'));
    expect(retry.status).toBe(201);
    expect(runs.get(key)).toBe(2);
  });

  for (const when of ['at-once', 'later'] as const) {
    it(`releases the key of a 503 whose stream fails ${when}: the retry runs again`, async () => {
      const { handler, runs } = charges();
      const key = randomUUID();
      await firstAttempt(handler, post(key, 503, when));
      const retry = await handler(post(key, 503, when));
      expect(retry.status).toBe(201);
      expect(runs.get(key)).toBe(2);
    });
  }

  it('releases the key of an event stream that stops on its aborted signal once maxExecution passed, the client still reading', async () => {
    const engine = createIdempotency({ store: memoryStore(), leaseMs: 200, maxExecution: '100ms' });
    let runs = 0;
    const handler = withIdempotency(
      async (request: Request) => {
        runs++;
        const signal = idempotencyOf(request)?.signal;
        return new Response(
          new ReadableStream<Uint8Array>({
            async pull(controller) {
              await new Promise((resolve) => setTimeout(resolve, 20));
              if (signal?.aborted) controller.error(signal.reason);
              else controller.enqueue(new TextEncoder().encode('data: tick\n\n'));
            },
          }),
          { status: 200, headers: { 'content-type': 'text/event-stream' } },
        );
      },
      { engine },
    );
    const key = randomUUID();
    const request = () =>
      new Request('http://api.test/events', {
        method: 'POST',
        headers: { 'idempotency-key': key },
      });
    await (await handler(request())).text().catch(() => undefined);
    await new Promise((resolve) => setTimeout(resolve, 400));
    await handler(request());
    expect(runs).toBe(2);
  });
});

describe('the cut marker in the stored form', () => {
  it('round-trips with its flag, and its replay says the body failed', () => {
    const decoded = httpResponseCodec.decode(
      httpResponseCodec.encode({ kind: 'not_captured', status: 201, cut: true }),
    );
    expect(decoded).toEqual({ kind: 'not_captured', status: 201, cut: true });
    const replay = replayResponse(decoded as never);
    expect(replay.status).toBe(409);
  });

  it("round-trips a timeout's marker with its flag, and its replay says a timeout answered", () => {
    const decoded = httpResponseCodec.decode(
      httpResponseCodec.encode({ kind: 'not_captured', status: 504, timedOut: true }),
    );
    expect(decoded).toEqual({ kind: 'not_captured', status: 504, timedOut: true });
    const body = JSON.parse(Buffer.from(replayResponse(decoded as never).body).toString('utf8'));
    expect(body.code).toBe('response_not_captured');
    expect(body.detail).toBe(
      "The first request was answered by a timeout (status 504) while its handler ran on, so the handler's own response could not be kept and its outcome is unknown; it will not be run again for this key. Check whether the operation took effect before sending it again with a new key.",
    );
  });

  it('reads a marker stored without the flag as a response that went around the capture', () => {
    const decoded = httpResponseCodec.decode(
      httpResponseCodec.encode({ kind: 'not_captured', status: 201 }),
    );
    expect(decoded).toEqual({ kind: 'not_captured', status: 201 });
    const body = Buffer.from(replayResponse(decoded as never).body).toString('utf8');
    expect(body).toContain('without passing through');
  });
});
