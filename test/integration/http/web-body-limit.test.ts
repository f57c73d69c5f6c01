/**
 * The fetch and Hono adapters read the body of every request with a key for the fingerprint: at most
 * `requestBodyLimit` bytes. A Content-Length over it is refused (413) without reading the body, a chunked
 * body once it goes over, the rest never read; nothing runs or is stored. Bodies within it keep the
 * fingerprints they had, and reach the handler whole.
 */
import { createHash, randomUUID } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { Hono } from 'hono';
import { afterEach, describe, expect, it } from 'vitest';
import { withIdempotency } from '../../../src/fetch/index.js';
import { idempotency } from '../../../src/hono/index.js';
import { type HttpRouteOptions, httpFingerprint } from '../../../src/http/index.js';
import { memoryStore, type Store } from '../../../src/index.js';
import { type ListeningFetch, listenFetch } from '../../helpers/listen-fetch.js';

let server: ListeningFetch | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

/** What a test serves: the handler sees the body it read, as text. */
type Serve = (
  options: HttpRouteOptions & { store?: Store },
  handler: (body: string) => Response,
) => (request: Request) => Response | Promise<Response>;

const adapters: Array<[string, Serve]> = [
  [
    'fetch',
    ({ store, ...options }, handler) =>
      withIdempotency(async (request) => handler(await request.text()), {
        store: store ?? memoryStore(),
        ...options,
      }),
  ],
  [
    'Hono',
    ({ store, ...options }, handler) => {
      const app = new Hono();
      app.use(idempotency({ store: store ?? memoryStore(), ...options }));
      app.post('/upload', async (c) => handler(await c.req.text()));
      return app.fetch;
    },
  ],
];

/** A body of `mib` MiB sent chunked, a MiB a pull; `pulled()` tells how many the client has sent. */
function chunkedMiB(mib: number): { init: RequestInit; pulled(): number } {
  let pulls = 0;
  const body = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (pulls === mib) controller.close();
      else {
        pulls++;
        controller.enqueue(new Uint8Array(1024 * 1024).fill(120));
      }
    },
  });
  return { init: { body, duplex: 'half' } as RequestInit, pulled: () => pulls };
}

/** A POST that announces `length` bytes and sends only `sent`: the status it is answered with. */
function announce(url: string, key: string, length: number, sent: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, {
      method: 'POST',
      agent: false,
      headers: { 'idempotency-key': key, 'content-length': String(length) },
    });
    req.on('response', (res) => {
      resolve(res.statusCode ?? 0);
      res.resume();
      req.destroy();
    });
    req.on('error', reject);
    req.write(new Uint8Array(sent));
  });
}

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

describe.each(adapters)(
  '%s: the request body with a key, up to requestBodyLimit',
  (_name, serve) => {
    it('refuses a Content-Length over the limit with 413 without reading the body: nothing runs or is stored', async () => {
      // Arrange
      let runs = 0;
      const handler = (body: string) => {
        runs++;
        return Response.json({ length: body.length }, { status: 201 });
      };
      server = await listenFetch(serve({ requestBodyLimit: 1024 }, handler), '/upload');
      const key = randomUUID();
      // Act: 100 MiB announced, 10 bytes sent, and the answer comes all the same.
      const announced = await announce(server.url, key, 100 * 1024 * 1024, 10);
      const small = await fetch(server.url, {
        method: 'POST',
        headers: { 'idempotency-key': key },
        body: 'x'.repeat(1024),
      });
      // Assert
      expect(announced).toBe(413);
      expect(small.status).toBe(201);
      expect(await small.json()).toEqual({ length: 1024 });
      expect(runs).toBe(1);
    });

    it('refuses a chunked body once it goes over, with the rest of it still unsent', async () => {
      // Arrange
      let runs = 0;
      const handler = () => {
        runs++;
        return new Response(null, { status: 204 });
      };
      server = await listenFetch(serve({}, handler), '/upload'); // the default limit: 1 MiB
      const upload = chunkedMiB(256);
      // Act
      const response = await fetch(server.url, {
        method: 'POST',
        headers: { 'idempotency-key': randomUUID(), 'content-type': 'application/octet-stream' },
        ...upload.init,
      });
      // Assert: answered long before the 256 MiB were sent (the server stops reading at the limit).
      expect(response.status).toBe(413);
      expect(response.headers.get('content-type')).toBe('application/problem+json');
      expect(await response.json()).toMatchObject({ status: 413, code: 'request_too_large' });
      expect(upload.pulled()).toBeLessThan(64);
      expect(runs).toBe(0);
    });

    it('fingerprints a chunked body within the limit and hands it whole to the handler', async () => {
      // Arrange
      const seen: string[] = [];
      const handler = (body: string) => {
        seen.push(sha256(body));
        return Response.json({ sha256: sha256(body) }, { status: 201 });
      };
      server = await listenFetch(serve({ requestBodyLimit: 4 * 1024 * 1024 }, handler), '/upload');
      const headers = { 'idempotency-key': randomUUID(), 'content-type': 'text/plain' };
      const post = (text: string) =>
        fetch(server!.url, { method: 'POST', headers, ...chunkedText(text) });
      const text = 'pay alice 10;'.repeat(200_000); // 2.6 MB, in many chunks
      // Act
      const first = await post(text);
      const retry = await post(text);
      const other = await post(`${text.slice(0, -1)}!`);
      // Assert
      expect(first.status).toBe(201);
      expect(await first.json()).toEqual({ sha256: sha256(text) });
      expect(retry.headers.get('idempotent-replayed')).toBe('true');
      expect(other.status).toBe(422);
      expect(seen).toHaveLength(1);
    });

    it('keeps the fingerprint of a body with a Content-Length within the limit', async () => {
      // Arrange
      const fingerprints: string[] = [];
      const inner = memoryStore();
      const store = Object.create(inner) as Store;
      store.claim = (key, claim) => {
        fingerprints.push(claim.fingerprint);
        return inner.claim(key, claim);
      };
      server = await listenFetch(
        serve({ store }, () => new Response(null, { status: 201 })),
        '/upload',
      );
      const body = '{"b":1,"a":2}';
      // Act
      await fetch(server.url, {
        method: 'POST',
        headers: { 'idempotency-key': randomUUID(), 'content-type': 'application/json' },
        body,
      });
      // Assert: the bytes, as the adapters always fingerprinted them.
      expect(fingerprints).toEqual([
        httpFingerprint({
          method: 'POST',
          path: '/upload',
          query: '',
          contentType: 'application/json',
          body: new Uint8Array(Buffer.from(body)),
        }),
      ]);
    });

    it('with requestBodyLimit: false, leaves the body out and to the handler, fingerprinting the digest header', async () => {
      // Arrange
      const handler = (body: string) => Response.json({ sha256: sha256(body) }, { status: 201 });
      const options = { requestBodyLimit: false as const, fingerprintHeaders: ['content-digest'] };
      server = await listenFetch(serve(options, handler), '/upload');
      const key = randomUUID();
      const video = 'v'.repeat(2 * 1024 * 1024);
      const post = (digest: string, body = video) =>
        fetch(server!.url, {
          method: 'POST',
          headers: { 'idempotency-key': key, 'content-digest': digest },
          body,
        });
      // Act
      const first = await post('sha-256=:one:');
      const retry = await post('sha-256=:one:', 'the body is not compared');
      const other = await post('sha-256=:two:');
      // Assert
      expect(first.status).toBe(201);
      expect(await first.json()).toEqual({ sha256: sha256(video) });
      expect(retry.headers.get('idempotent-replayed')).toBe('true');
      expect(other.status).toBe(422);
    });
  },
);

describe('Hono: a body a middleware before the layer read', () => {
  it('is fingerprinted from the cache, within the limit of whoever read it rather than requestBodyLimit', async () => {
    // Arrange: a validator-like middleware reads the JSON first.
    const app = new Hono();
    app.use(async (c, next) => {
      await c.req.json();
      await next();
    });
    app.use(idempotency({ store: memoryStore(), requestBodyLimit: 16 }));
    app.post('/upload', async (c) => c.json(await c.req.json(), 201));
    server = await listenFetch(app.fetch, '/upload');
    const key = randomUUID();
    const post = (body: string) =>
      fetch(server!.url, {
        method: 'POST',
        headers: { 'idempotency-key': key, 'content-type': 'application/json' },
        body,
      });
    // Act
    const first = await post('{"amount":10,"to":"alice","memo":"rent"}');
    const reordered = await post('{"to":"alice","memo":"rent","amount":10}');
    const other = await post('{"amount":10000,"to":"mallory","memo":"rent"}');
    // Assert
    expect(first.status).toBe(201);
    expect(await first.json()).toEqual({ amount: 10, to: 'alice', memo: 'rent' });
    expect(reordered.headers.get('idempotent-replayed')).toBe('true');
    expect(other.status).toBe(422);
  });
});

/** `text` sent chunked, 64 KiB a pull. */
function chunkedText(text: string): RequestInit {
  const bytes = Buffer.from(text);
  let at = 0;
  const body = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (at >= bytes.length) return controller.close();
      controller.enqueue(new Uint8Array(bytes.subarray(at, at + 64 * 1024)));
      at += 64 * 1024;
    },
  });
  return { body, duplex: 'half' } as RequestInit;
}
