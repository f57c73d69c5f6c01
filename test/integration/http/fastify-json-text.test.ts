/**
 * With `keepJsonText: true` the Fastify plugin keeps the JSON text of the requests it fingerprints, copying
 * the body as Fastify reads it: only those requests, whole however many chunks it arrives in and after an
 * earlier hook decoded it, without changing what Fastify does with a body that is invalid, too large or
 * cut off by the client.
 */
import { randomUUID } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { PassThrough } from 'node:stream';
import { createGunzip, gzipSync } from 'node:zlib';
import fastify, { type FastifyInstance, type preParsingHookHandler } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { idempotencyPlugin } from '../../../src/fastify/index.js';
import { jsonTextOf } from '../../../src/fastify/json-text.js';
import { memoryStore } from '../../../src/index.js';

interface Seen {
  body: unknown;
  text: string | undefined;
}

let app: FastifyInstance | undefined;
afterEach(async () => {
  await app?.close();
  app = undefined;
});

// `keepJsonText: true` unless told otherwise; 'omitted' registers the plugin without the option.
// `laterHook: false` leaves out the hook that wraps the body in a stream of its own after the plugin's
// (that stream does not carry the encoded length on).
async function start(
  options: { keepJsonText?: boolean | 'omitted'; bodyLimit?: number; laterHook?: boolean } = {},
) {
  const keepJsonText = options.keepJsonText ?? true;
  const seen: Seen[] = [];
  app = fastify({ bodyLimit: options.bodyLimit ?? 1024 * 1024 });
  // Gzip-encoded bodies are decoded by a hook of the app's, as Fastify's docs show: it counts the encoded
  // bytes in receivedEncodedLength, which Fastify checks against content-length.
  app.addHook('preParsing', (request, _reply, payload, done) => {
    if (request.headers['content-encoding'] !== 'gzip') return done(null, payload);
    const gunzip = createGunzip() as ReturnType<typeof createGunzip> & {
      receivedEncodedLength: number;
    };
    gunzip.receivedEncodedLength = 0;
    payload.on('data', (chunk: Buffer) => {
      gunzip.receivedEncodedLength += chunk.length;
    });
    done(null, payload.pipe(gunzip));
  });
  await app.register(idempotencyPlugin, {
    store: memoryStore(),
    ...(keepJsonText === 'omitted' ? {} : { keepJsonText }),
  });
  // A preParsing hook after the plugin's, as another plugin's onRoute may add one: it reads the plugin's
  // stream through a stream of its own, and listens for no errors.
  if (options.laterHook !== false) {
    app.addHook('onRoute', (route) => {
      const later: preParsingHookHandler = (_request, _reply, payload, done) =>
        done(null, payload.pipe(new PassThrough()));
      route.preParsing = [route.preParsing ?? [], later].flat();
    });
  }
  const handler = async (request: import('fastify').FastifyRequest) => {
    seen.push({ body: request.body, text: jsonTextOf(request)?.toString('utf8') });
    return { ok: true };
  };
  app.post('/orders', handler);
  app.post('/ping', { config: { idempotency: false } }, handler);
  app.put('/orders', handler);
  await app.listen({ port: 0, host: '127.0.0.1' });
  const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  return { seen, base };
}

const post = (url: string, body: string, headers: Record<string, string> = {}) =>
  fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body,
  });

describe('Fastify plugin: the JSON text it keeps', () => {
  it('keeps the text of a keyed JSON request and hands the handler the parsed body as before', async () => {
    // Arrange
    const { seen, base } = await start();
    const text = '{"account":9223372036854775807, "amount":100}';
    // Act
    const response = await post(`${base}/orders`, text, { 'idempotency-key': randomUUID() });
    // Assert
    expect(response.status).toBe(200);
    expect(seen).toEqual([{ body: JSON.parse(text), text }]);
  });

  it('keeps a body that arrives in many chunks whole, byte for byte', async () => {
    // Arrange: some 300 kB, multi-byte characters included, read by Fastify in many chunks
    const { seen, base } = await start();
    const items = Array.from({ length: 3000 }, (_, i) => ({
      id: `9223372036854775${i}`,
      note: 'é€𝄞'.repeat(20),
    }));
    const text = JSON.stringify({ account: 1, items }).replace(
      '"account":1',
      '"account":9223372036854775807',
    );
    // Act
    const response = await post(`${base}/orders`, text, { 'idempotency-key': randomUUID() });
    // Assert
    expect(response.status).toBe(200);
    expect(seen[0]?.text).toBe(text);
  });

  it('keeps the decoded text of a body an earlier hook decodes (gzip), and Fastify still checks its length', async () => {
    // Arrange
    const { seen, base } = await start({ laterHook: false });
    const text = '{"account":9223372036854775807,"amount":100}';
    // Act
    const response = await fetch(`${base}/orders`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'content-encoding': 'gzip',
        'idempotency-key': randomUUID(),
      },
      body: gzipSync(text),
    });
    // Assert
    expect(response.status).toBe(200);
    expect(seen).toEqual([{ body: JSON.parse(text), text }]);
  });

  it('copies nothing the layer does not fingerprint (no key, a route turned off, a method not covered, not JSON), nor by default', async () => {
    // Arrange
    const { seen, base } = await start();
    const key = () => ({ 'idempotency-key': randomUUID() });
    // Act
    await post(`${base}/orders`, '{"a":1}');
    await post(`${base}/ping`, '{"a":1}', key());
    await fetch(`${base}/orders`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json', ...key() },
      body: '{"a":1}',
    });
    await post(`${base}/orders`, 'a=1', { ...key(), 'content-type': 'text/plain' });
    await app?.close();
    const off = await start({ keepJsonText: 'omitted' });
    await post(`${off.base}/orders`, '{"a":1}', key());
    // Assert
    expect(seen.map((s) => s.text)).toEqual([undefined, undefined, undefined, undefined]);
    expect(off.seen).toEqual([{ body: { a: 1 }, text: undefined }]);
  });

  it('leaves invalid JSON to Fastify (400, nothing stored): the key then serves the valid request', async () => {
    // Arrange
    const { seen, base } = await start();
    const key = randomUUID();
    // Act
    const invalid = await post(`${base}/orders`, '{"account":', { 'idempotency-key': key });
    const valid = await post(`${base}/orders`, '{"account":1}', { 'idempotency-key': key });
    // Assert
    expect(invalid.status).toBe(400);
    expect(valid.status).toBe(200);
    expect(valid.headers.get('idempotent-replayed')).toBeNull();
    expect(seen).toHaveLength(1);
  });

  it('keeps Fastify’s body limit: a body over bodyLimit is 413, the handler never runs', async () => {
    // Arrange
    const { seen, base } = await start({ bodyLimit: 64 });
    // Act
    const response = await post(`${base}/orders`, JSON.stringify({ note: 'x'.repeat(200) }), {
      'idempotency-key': randomUUID(),
    });
    // Assert
    expect(response.status).toBe(413);
    expect(seen).toHaveLength(0);
  });

  it('survives a client that goes away mid-body, and serves the next request', async () => {
    // Arrange
    const { seen, base } = await start();
    const url = new URL(`${base}/orders`);
    // Act: headers promise 1000 bytes, 10 arrive, then the connection closes
    await new Promise<void>((resolve) => {
      const req = httpRequest({
        host: url.hostname,
        port: url.port,
        path: url.pathname,
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'content-length': '1000',
          'idempotency-key': randomUUID(),
        },
      });
      req.on('error', () => resolve());
      req.write('{"account":');
      setTimeout(() => {
        req.destroy();
        resolve();
      }, 50);
    });
    const next = await post(`${base}/orders`, '{"account":2}', { 'idempotency-key': randomUUID() });
    // Assert
    expect(next.status).toBe(200);
    expect(seen).toEqual([{ body: { account: 2 }, text: '{"account":2}' }]);
  });
});
