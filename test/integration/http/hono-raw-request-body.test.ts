/**
 * The Hono middleware reads the request body for the fingerprint; a handler that reads the raw request
 * (`c.req.raw.text()`, `c.req.raw.formData()`, its stream, or hands `c.req.raw` on to a fetch-style
 * handler) must find that body, as without the layer, on `@hono/node-server`. Before, it found the body
 * used and answered 500 ("Body is unusable"), or, reading a chunked body's stream, got no bytes and ran
 * (and was stored) on an empty body.
 */
import { randomUUID } from 'node:crypto';
import { Hono } from 'hono';
import { describe, expect, it } from 'vitest';
import { idempotency } from '../../../src/hono/index.js';
import { memoryStore } from '../../../src/index.js';
import { listenFetchForTest } from '../../helpers/listen-fetch.js';

type RawRead = 'text' | 'stream' | 'form';

// A charge route whose handler reads the raw request; `runs` counts its executions.
async function rawRoute(read: RawRead) {
  const seen: string[] = [];
  const app = new Hono();
  app.post('/charges', idempotency({ store: memoryStore() }), async (c) => {
    let body: string;
    if (read === 'text') body = await c.req.raw.text();
    else if (read === 'form') body = JSON.stringify([...(await c.req.raw.formData()).entries()]);
    else body = await new Response(c.req.raw.body).text();
    seen.push(body);
    return c.json({ charged: body, id: randomUUID() }, 201);
  });
  return { base: await listenFetchForTest(app.fetch), seen };
}

const chunked = (text: string) =>
  new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(new TextEncoder().encode(text));
      controller.close();
    },
  });

async function post(base: string, key: string, body: () => RequestInit['body']) {
  const response = await fetch(`${base}/charges`, {
    method: 'POST',
    headers: { 'idempotency-key': key },
    body: body(),
    duplex: 'half',
  } as RequestInit);
  return { status: response.status, body: await response.text() };
}

describe('Hono middleware: the handler reads c.req.raw', () => {
  for (const read of ['text', 'stream'] as const) {
    for (const framing of ['Content-Length', 'chunked'] as const) {
      it(`gives the handler the body through c.req.raw (${read}, ${framing}); the retry is the replay`, async () => {
        // Arrange
        const { base, seen } = await rawRoute(read);
        const json = '{"amount":4200}';
        const body = () => (framing === 'chunked' ? chunked(json) : json);
        const key = randomUUID();
        // Act
        const first = await post(base, key, body);
        const retry = await post(base, key, body);
        const other = await post(base, key, () => '{"amount":1}');
        // Assert
        expect(first.status).toBe(201);
        expect(seen).toEqual([json]);
        expect(retry).toEqual(first);
        expect(other.status).toBe(422); // still fingerprinted by the body
      });
    }
  }

  it('gives the handler the form through c.req.raw.formData()', async () => {
    // Arrange
    const { base, seen } = await rawRoute('form');
    const form = () => {
      const data = new FormData();
      data.append('amount', '4200');
      return data;
    };
    // Act
    const first = await post(base, randomUUID(), form);
    // Assert
    expect(first.status).toBe(201);
    expect(seen).toEqual([JSON.stringify([['amount', '4200']])]);
  });

  it('keeps c.req.raw.signal: it aborts when the client leaves, and the run completes and is replayed', async () => {
    // Arrange
    let aborted: () => void = () => {};
    const abortSeen = new Promise<void>((resolve) => {
      aborted = resolve;
    });
    let runs = 0;
    const app = new Hono();
    app.post('/charges', idempotency({ store: memoryStore() }), async (c) => {
      runs++;
      await new Promise<void>((resolve) => {
        if (c.req.raw.signal.aborted) resolve();
        c.req.raw.signal.addEventListener('abort', () => resolve(), { once: true });
      });
      aborted();
      return c.json({ charged: await c.req.raw.text() }, 201);
    });
    const base = await listenFetchForTest(app.fetch);
    const key = randomUUID();
    const client = new AbortController();
    // Act
    const gone = fetch(`${base}/charges`, {
      method: 'POST',
      headers: { 'idempotency-key': key },
      body: '{"amount":4200}',
      signal: client.signal,
    }).catch(() => undefined);
    // Once the handler runs (the body was read): the client leaves.
    while (runs === 0) await new Promise((resolve) => setTimeout(resolve, 5));
    client.abort();
    await gone;
    await abortSeen;
    let retry = await post(base, key, () => '{"amount":4200}');
    while (retry.status === 409) {
      await new Promise((resolve) => setTimeout(resolve, 20));
      retry = await post(base, key, () => '{"amount":4200}');
    }
    // Assert
    expect(runs).toBe(1);
    expect(retry).toEqual({ status: 201, body: '{"charged":"{\\"amount\\":4200}"}' });
  });
});
