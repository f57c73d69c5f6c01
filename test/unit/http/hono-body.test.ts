import { Hono } from 'hono';
import { describe, expect, it } from 'vitest';
import { idempotency } from '../../../src/hono/index.js';
import { memoryStore } from '../../../src/index.js';

// The Hono middleware reads the request body as bytes (for the fingerprint) and derives the handler's
// `c.req.text()` / `c.req.json()` from them: the handler must see exactly what it would see without it.
async function readBack(withLayer: boolean, body: Uint8Array, read: 'text' | 'json' | 'bytes') {
  const app = new Hono();
  if (withLayer) app.use('/echo', idempotency({ store: memoryStore() }));
  app.post('/echo', async (c) => {
    if (read === 'json') return c.json({ parsed: await c.req.json() });
    if (read === 'text') return c.json({ text: await c.req.text() });
    return c.json({ bytes: [...new Uint8Array(await c.req.arrayBuffer())] });
  });
  const response = await app.request('/echo', {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': `k-${Math.random()}` },
    body,
  });
  return { status: response.status, body: await response.json() };
}

const utf8 = (text: string) => new TextEncoder().encode(text);

describe('Hono middleware: the handler reads the body as without the layer', () => {
  const bodies: Array<[string, Uint8Array]> = [
    ['JSON', utf8('{"amount":4200,"note":"café ☕"}')],
    ['JSON after a byte-order mark', Uint8Array.of(0xef, 0xbb, 0xbf, ...utf8('{"a":1}'))],
    ['invalid UTF-8', Uint8Array.of(0x7b, 0xff, 0xfe, 0x7d)],
    ['an empty body', new Uint8Array(0)],
  ];

  for (const [name, body] of bodies) {
    for (const read of ['text', 'bytes'] as const) {
      it(`gives the same ${read} for ${name}`, async () => {
        // Arrange / Act
        const plain = await readBack(false, body, read);
        const layered = await readBack(true, body, read);
        // Assert
        expect(layered).toEqual(plain);
      });
    }
  }

  it('gives the same parsed JSON', async () => {
    // Arrange
    const body = utf8('{"b":[1,2,{"c":null}],"a":"x"}');
    // Act
    const plain = await readBack(false, body, 'json');
    const layered = await readBack(true, body, 'json');
    // Assert
    expect(layered).toEqual(plain);
    expect(layered.status).toBe(200);
  });
});

describe('Hono middleware: the handler reads c.req.raw as without the layer', () => {
  // A fetch Request (as on Bun, Deno, `app.request`), not @hono/node-server's: see
  // test/integration/http/hono-raw-request-body.test.ts for that one.
  it('gives c.req.raw its body: text, a clone, bodyUsed', async () => {
    // Arrange
    const app = new Hono();
    app.post('/echo', idempotency({ store: memoryStore() }), async (c) => {
      const clone = c.req.raw.clone();
      const usedBefore = c.req.raw.bodyUsed;
      const text = await c.req.raw.text();
      return c.json({ text, usedBefore, usedAfter: c.req.raw.bodyUsed, clone: await clone.text() });
    });
    // Act
    const response = await app.request('/echo', {
      method: 'POST',
      headers: { 'idempotency-key': `k-${Math.random()}` },
      body: '{"amount":4200}',
    });
    // Assert
    expect(await response.json()).toEqual({
      text: '{"amount":4200}',
      usedBefore: false,
      usedAfter: true,
      clone: '{"amount":4200}',
    });
  });
});
