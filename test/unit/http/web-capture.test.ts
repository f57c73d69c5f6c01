/**
 * The capture of a fetch `Response` (fetch and Hono adapters) when the response cannot be read: a body the
 * handler already read or locked, or no `Response` at all. The key is released (the retry runs again)
 * instead of staying in progress while the process lives. And a body too large to keep, streamed through,
 * passes the client's cancel on to the handler's stream.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { withIdempotency } from '../../../src/fetch/index.js';
import { memoryStore } from '../../../src/index.js';

const post = (path: string, key: string) =>
  new Request(`http://api.test${path}`, { method: 'POST', headers: { 'idempotency-key': key } });

describe('capturing a fetch Response', () => {
  it('releases the key when the response cannot be read, so the retry runs again rather than 409', async () => {
    let runs = 0;
    const handler = withIdempotency(
      async (request: Request) => {
        runs++;
        const path = new URL(request.url).pathname;
        if (runs % 2 === 0) return Response.json({ ok: true }, { status: 201 });
        if (path === '/read') {
          const read = new Response('{"ok":true}');
          await read.text();
          return read;
        }
        if (path === '/locked') {
          const locked = new Response('{"ok":true}');
          locked.body?.getReader();
          return locked;
        }
        return undefined as unknown as Response; // a forgotten `return`
      },
      { store: memoryStore() },
    );
    for (const path of ['/read', '/locked', '/nothing']) {
      const key = randomUUID();
      await expect(handler(post(path, key))).rejects.toThrow(TypeError);
      const retry = await handler(post(path, key));
      expect(retry.status).toBe(201);
      expect(await retry.json()).toEqual({ ok: true });
    }
    expect(runs).toBe(6);
  });

  it('cancels the handler’s stream when the client cancels a body too large to keep', async () => {
    let cancelled: unknown;
    const handler = withIdempotency(
      async () =>
        new Response(
          new ReadableStream<Uint8Array>({
            pull(controller) {
              controller.enqueue(new Uint8Array(4096));
            },
            cancel(reason) {
              cancelled = reason;
            },
          }),
        ),
      { store: memoryStore(), maxBodyBytes: 1024 },
    );
    const response = await handler(post('/export', randomUUID()));
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    await reader.read();
    await reader.cancel('client went away');
    expect(cancelled).toBe('client went away');
  });
});
