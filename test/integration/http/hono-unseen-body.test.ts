/**
 * Hono: a body a middleware before the layer read from `c.req.raw` itself (`await c.req.raw.text()`), not
 * through `c.req`, which keeps what it reads in its body cache. The layer found the body used and every
 * keyed request was a bare 500 "TypeError: Body is unusable". It is now refused as Express and Fastify
 * refuse a body read before them and left nowhere: an `InvalidOptionsError` naming the route, through the
 * app's onError, nothing run or claimed; unless the route sets `requestBodyLimit: false`.
 */
import { randomUUID } from 'node:crypto';
import { Hono } from 'hono';
import { describe, expect, it } from 'vitest';
import { idempotency } from '../../../src/hono/index.js';
import { InvalidOptionsError, memoryStore, type Store } from '../../../src/index.js';
import { listenFetchForTest } from '../../helpers/listen-fetch.js';

/** A memory store that keeps the fingerprint of each claim. */
function fingerprinting(): { store: Store; seen: string[] } {
  const inner = memoryStore();
  const seen: string[] = [];
  const store = Object.create(inner) as Store;
  store.claim = (key, claim) => {
    seen.push(claim.fingerprint);
    return inner.claim(key, claim);
  };
  return { store, seen };
}

interface Started {
  base: string;
  runs: () => number;
  errors: unknown[];
  seen: string[];
}

async function start(
  read: (c: { req: { raw: Request; text(): Promise<string> } }) => Promise<unknown>,
  requestBodyLimit?: false,
): Promise<Started> {
  const { store, seen } = fingerprinting();
  const errors: unknown[] = [];
  let runs = 0;
  const app = new Hono();
  app.onError((error, c) => {
    errors.push(error);
    return c.json({ code: (error as { code?: string }).code, message: error.message }, 500);
  });
  // A middleware before the layer that reads the body, as an audit log or a signature check may.
  app.use('/orders', async (c, next) => {
    await read(c);
    await next();
  });
  app.post(
    '/orders',
    idempotency({
      store,
      key: 'required',
      ...(requestBodyLimit === false
        ? { requestBodyLimit, fingerprintHeaders: ['content-digest'] }
        : {}),
    }),
    (c) => {
      runs++;
      return c.json({ n: runs }, 201);
    },
  );
  return { base: await listenFetchForTest(app.fetch), runs: () => runs, errors, seen };
}

const chunked = (text: string) =>
  new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(new TextEncoder().encode(text));
      controller.close();
    },
  });

async function post(base: string, framing: 'Content-Length' | 'chunked', key = randomUUID()) {
  const json = '{"amount":4200}';
  const response = await fetch(`${base}/orders`, {
    method: 'POST',
    headers: { 'idempotency-key': key, 'content-type': 'application/json' },
    body: framing === 'chunked' ? chunked(json) : json,
    duplex: 'half',
  } as RequestInit);
  return { status: response.status, text: await response.text() };
}

describe('Hono: a body read from c.req.raw before the middleware', () => {
  for (const framing of ['Content-Length', 'chunked'] as const) {
    it(`is refused with an InvalidOptionsError through onError, nothing run or claimed (${framing})`, async () => {
      // Arrange
      const app = await start((c) => c.req.raw.text());
      // Act
      const answer = await post(app.base, framing);
      // Assert
      expect(answer.status).toBe(500);
      expect(app.errors).toHaveLength(1);
      expect(app.errors[0]).toBeInstanceOf(InvalidOptionsError);
      expect(JSON.parse(answer.text)).toMatchObject({ code: 'invalid_options' });
      expect(answer.text).toContain('POST /orders');
      expect(answer.text).toContain('c.req.raw');
      expect(app.runs()).toBe(0);
      expect(app.seen).toEqual([]);
    });
  }

  it('is refused when the middleware read c.req.raw.body, the stream', async () => {
    const app = await start((c) => new Response(c.req.raw.body).text());
    const answer = await post(app.base, 'Content-Length');
    expect(answer.status).toBe(500);
    expect(app.errors[0]).toBeInstanceOf(InvalidOptionsError);
    expect(app.runs()).toBe(0);
    expect(app.seen).toEqual([]);
  });

  it('runs with requestBodyLimit: false (the body left out, a digest header fingerprinted)', async () => {
    const app = await start((c) => c.req.raw.text(), false);
    const answer = await post(app.base, 'Content-Length');
    expect(answer.status).toBe(201);
    expect(app.runs()).toBe(1);
  });

  it('still runs and replays when the middleware read it through c.req, which keeps it', async () => {
    const app = await start((c) => c.req.text());
    const key = randomUUID();
    const first = await post(app.base, 'Content-Length', key);
    const retry = await post(app.base, 'Content-Length', key);
    expect(first.status).toBe(201);
    expect(retry).toEqual(first);
    expect(app.runs()).toBe(1);
  });
});
