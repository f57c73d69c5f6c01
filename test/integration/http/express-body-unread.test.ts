/**
 * Request bodies no body parser before the Express middleware has read: a parser mounted on the route
 * after it (`express.text()`, `multer`, anything that reads the stream), or none at all. The middleware
 * reads them itself (up to `requestBodyLimit`) so that the fingerprint covers them, and hands the bytes
 * back to whoever reads the stream next; a larger one is refused (413). Bodies a parser before it read,
 * and requests without a body, keep the fingerprints they had.
 */
import { createHash, randomUUID } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import express from 'express';
import express4 from 'express4';
import { describe, expect, it } from 'vitest';
import { idempotency } from '../../../src/express/index.js';
import { httpFingerprint } from '../../../src/http/index.js';
import { type ClaimOptions, memoryStore, type Store } from '../../../src/index.js';
import { listenExpress } from '../../helpers/listen-express.js';

/** A POST of a `contentType` body to `url`; every call made through it carries the same new key. */
function underOneKey(url: string, contentType: string): (body: string) => Promise<Response> {
  const key = randomUUID();
  return (body) =>
    fetch(url, {
      method: 'POST',
      headers: { 'idempotency-key': key, 'content-type': contentType },
      body,
    });
}

/** A memory store that records the fingerprint of every claim. */
function recordingStore(): { store: Store; fingerprints: string[] } {
  const fingerprints: string[] = [];
  const inner = memoryStore();
  const store = new Proxy(inner, {
    get(target, name, receiver) {
      const value = Reflect.get(target, name, receiver) as unknown;
      if (name === 'claim') {
        return (key: string, options: ClaimOptions) => {
          fingerprints.push(options.fingerprint);
          return inner.claim(key, options);
        };
      }
      if (name === 'claimMany' && typeof value === 'function') {
        return (requests: ReadonlyArray<{ options: ClaimOptions }>) => {
          for (const request of requests) fingerprints.push(request.options.fingerprint);
          return (value as (r: unknown) => unknown).call(target, requests);
        };
      }
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  return { store, fingerprints };
}

/** Everything a request stream carries, read as a stream reader (busboy under multer) reads it. */
async function streamBytes(req: express.Request): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

const sha256 = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');

interface Raw {
  status: number;
  contentType: string | undefined;
  body: string;
}

/** A POST whose body goes out in `chunks` (chunked: no Content-Length), `delayMs` apart. */
function postChunked(
  url: string,
  headers: Record<string, string>,
  chunks: Buffer[],
  delayMs = 0,
): Promise<Raw> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method: 'POST', headers, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        body += chunk;
      });
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, contentType: res.headers['content-type'], body }),
      );
      res.on('error', reject);
    });
    req.on('error', reject);
    const writeNext = (i: number) => {
      if (i === chunks.length) {
        req.end();
        return;
      }
      req.write(chunks[i]);
      setTimeout(() => writeNext(i + 1), delayMs);
    };
    writeNext(0);
  });
}

describe.each([
  ['Express 5', express],
  ['Express 4', express4 as unknown as typeof express],
])('%s: a body the parsers before the middleware left unread', (_name, framework) => {
  it('refuses a key reused with another text body parsed on the route (422), and the route still parses it', async () => {
    // Arrange: a JSON parser before the middleware (the documented setup), text parsed on the route only.
    const app = framework();
    let runs = 0;
    app.use(express.json());
    app.use(idempotency({ store: memoryStore() }));
    app.post('/notes', express.text(), (req, res) => {
      runs++;
      res.status(201).json({ note: req.body });
    });
    const post = underOneKey(`${await listenExpress(app)}/notes`, 'text/plain');
    // Act
    const first = await post('pay alice 10');
    const retry = await post('pay alice 10');
    const other = await post('pay mallory 10000');
    // Assert
    expect(first.status).toBe(201);
    expect(await first.json()).toEqual({ note: 'pay alice 10' });
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(await retry.json()).toEqual({ note: 'pay alice 10' });
    expect(other.status).toBe(422);
    expect(await other.json()).toMatchObject({ code: 'key_mismatch' });
    expect(runs).toBe(1);
  });

  it('fingerprints an upload a stream reader takes on the route: a retried form replays, another file is 422', async () => {
    // Arrange: the handler reads the stream itself, as multer's busboy does.
    const app = framework();
    const seen: string[] = [];
    app.use(express.urlencoded({ extended: false }));
    app.use(idempotency({ store: memoryStore() }));
    app.post('/evidence', async (req, res) => {
      const bytes = await streamBytes(req);
      seen.push(bytes.toString('latin1'));
      res.status(201).json({ bytes: bytes.byteLength });
    });
    const base = await listenExpress(app);
    const key = randomUUID();
    const upload = (file: string) => {
      const form = new FormData();
      form.append('dispute', 'dp_1');
      form.append('evidence', new Blob([file], { type: 'application/pdf' }), 'receipt.pdf');
      // fetch picks a new random boundary on each call.
      return fetch(`${base}/evidence`, {
        method: 'POST',
        headers: { 'idempotency-key': key },
        body: form,
      });
    };
    // Act
    const first = await upload('%PDF receipt of alice');
    const retry = await upload('%PDF receipt of alice');
    const other = await upload('%PDF receipt of mallory');
    // Assert
    expect(first.status).toBe(201);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(other.status).toBe(422);
    expect(seen).toHaveLength(1);
    expect(seen[0]).toContain('%PDF receipt of alice');
    expect(seen[0]).toMatch(/--\r\n$/); // the whole form, down to its closing delimiter
  });

  it('hands a chunked body that arrives in many pieces back whole, in order', async () => {
    // Arrange
    const app = framework();
    app.use(idempotency({ store: memoryStore() }));
    app.post('/blobs', async (req, res) => {
      res.status(201).json({ sha256: sha256(await streamBytes(req)) });
    });
    const base = await listenExpress(app);
    const chunks = Array.from({ length: 12 }, (_, i) => Buffer.alloc(64 * 1024, i + 1));
    const headers = { 'idempotency-key': randomUUID(), 'content-type': 'application/octet-stream' };
    // Act
    const first = await postChunked(`${base}/blobs`, headers, chunks, 2);
    const changed = chunks.map((chunk, i) => (i === 11 ? Buffer.alloc(chunk.length, 0) : chunk));
    const other = await postChunked(`${base}/blobs`, headers, changed);
    // Assert
    expect(first.status).toBe(201);
    expect(JSON.parse(first.body)).toEqual({ sha256: sha256(Buffer.concat(chunks)) });
    expect(other.status).toBe(422);
  });

  it('canonicalises JSON a parser mounted after the middleware reads: key order does not matter', async () => {
    // Arrange
    const app = framework();
    let runs = 0;
    app.use(idempotency({ store: memoryStore() }));
    app.use(express.json());
    app.post('/payments', (req, res) => {
      runs++;
      res.status(201).json({ paid: req.body as unknown });
    });
    const post = underOneKey(`${await listenExpress(app)}/payments`, 'application/json');
    // Act
    const first = await post('{"amount":10,"to":"alice"}');
    const reordered = await post('{ "to": "alice", "amount": 10 }');
    const other = await post('{"amount":10000,"to":"mallory"}');
    // Assert
    expect(await first.json()).toEqual({ paid: { amount: 10, to: 'alice' } });
    expect(reordered.headers.get('idempotent-replayed')).toBe('true');
    expect(other.status).toBe(422);
    expect(runs).toBe(1);
  });

  it('refuses a body over requestBodyLimit with 413 request_too_large, runs and stores nothing', async () => {
    // Arrange
    const app = framework();
    let runs = 0;
    app.use(idempotency({ store: memoryStore(), requestBodyLimit: 1024 }));
    app.post('/notes', express.text(), (req, res) => {
      runs++;
      res.status(201).json({ length: (req.body as string).length });
    });
    const base = await listenExpress(app);
    const key = randomUUID();
    const headers = { 'idempotency-key': key, 'content-type': 'text/plain' };
    // Act: one announced by its Content-Length, one chunked that goes over as it arrives.
    const announced = await fetch(`${base}/notes`, {
      method: 'POST',
      headers,
      body: 'x'.repeat(1025),
    });
    const chunked = await postChunked(`${base}/notes`, headers, [
      Buffer.alloc(1000, 'x'),
      Buffer.alloc(1000, 'x'),
    ]);
    const small = await fetch(`${base}/notes`, { method: 'POST', headers, body: 'x'.repeat(1024) });
    // Assert
    expect(announced.status).toBe(413);
    expect(announced.headers.get('content-type')).toBe('application/problem+json');
    expect(await announced.json()).toMatchObject({ status: 413, code: 'request_too_large' });
    expect(chunked.status).toBe(413);
    expect(JSON.parse(chunked.body)).toMatchObject({ code: 'request_too_large' });
    expect(small.status).toBe(201);
    expect(await small.json()).toEqual({ length: 1024 });
    expect(runs).toBe(1);
  });

  it('leaves requests without a body, and bodies a parser before it read, with the fingerprints they had', async () => {
    // Arrange
    const { store, fingerprints } = recordingStore();
    const app = framework();
    const bodies: unknown[] = [];
    app.use(express.json());
    app.use(idempotency({ store }));
    app.post('/orders', (req, res) => {
      bodies.push(req.body);
      res.status(201).end();
    });
    const base = await listenExpress(app);
    const post = (init: RequestInit & { headers: Record<string, string> }) =>
      fetch(`${base}/orders`, {
        method: 'POST',
        ...init,
        headers: { 'idempotency-key': randomUUID(), ...init.headers },
      });
    // Act: no body, an empty text body (Content-Length: 0), a JSON body the parser read.
    await post({ headers: {} });
    await post({ headers: { 'content-type': 'text/plain' }, body: '' });
    await post({ headers: { 'content-type': 'application/json' }, body: '{"b":1,"a":2}' });
    // Assert: what the parser made of each (`{}` or `undefined`), as the middleware always read it.
    const expected = [undefined, 'text/plain', 'application/json'].map((contentType, i) =>
      httpFingerprint({ method: 'POST', path: '/orders', query: '', contentType, body: bodies[i] }),
    );
    expect(bodies[2]).toEqual({ a: 2, b: 1 });
    expect(fingerprints).toEqual(expected);
  });

  it('with requestBodyLimit: false, leaves the body to the route and fingerprints the digest header', async () => {
    // Arrange
    const app = framework();
    app.use(
      idempotency({
        store: memoryStore(),
        requestBodyLimit: false,
        fingerprintHeaders: ['content-digest'],
      }),
    );
    app.post('/videos', async (req, res) => {
      res.status(201).json({ sha256: sha256(await streamBytes(req)) });
    });
    const base = await listenExpress(app);
    const key = randomUUID();
    const video = Buffer.alloc(2 * 1024 * 1024, 7);
    const post = (digest: string) =>
      fetch(`${base}/videos`, {
        method: 'POST',
        headers: { 'idempotency-key': key, 'content-digest': digest },
        body: video,
      });
    // Act
    const first = await post('sha-256=:one:');
    const other = await post('sha-256=:two:');
    // Assert
    expect(first.status).toBe(201);
    expect(await first.json()).toEqual({ sha256: sha256(video) });
    expect(other.status).toBe(422);
  });

  it('claims nothing for a client that goes away mid-body', async () => {
    // Arrange
    const app = framework();
    let runs = 0;
    let failed: unknown;
    app.use(idempotency({ store: memoryStore() }));
    app.post('/notes', express.text(), (req, res) => {
      runs++;
      res.status(201).json({ note: req.body });
    });
    app.use(
      (
        error: unknown,
        _req: express.Request,
        res: express.Response,
        _next: express.NextFunction,
      ) => {
        failed = error;
        res.status(400).end();
      },
    );
    const base = await listenExpress(app);
    const key = randomUUID();
    // Act: 10 of 100 announced bytes, then the connection is gone.
    const partial = httpRequest(`${base}/notes`, {
      method: 'POST',
      agent: false,
      headers: { 'idempotency-key': key, 'content-type': 'text/plain', 'content-length': '100' },
    });
    partial.on('error', () => {});
    partial.write('x'.repeat(10));
    await new Promise((done) => setTimeout(done, 50));
    partial.destroy();
    await expect.poll(() => failed).toBeDefined();
    const whole = await fetch(`${base}/notes`, {
      method: 'POST',
      headers: { 'idempotency-key': key, 'content-type': 'text/plain' },
      body: 'y'.repeat(100),
    });
    // Assert
    expect(failed).toMatchObject({ type: 'request.aborted' });
    expect(whole.status).toBe(201);
    expect(runs).toBe(1);
  });

  it('refuses a requestBodyLimit that is not a byte count or false', () => {
    // Act / Assert
    for (const requestBodyLimit of [-1, 1.5, '1mb', true]) {
      expect(() =>
        idempotency({ store: memoryStore(), requestBodyLimit } as unknown as Parameters<
          typeof idempotency
        >[0]),
      ).toThrow(/requestBodyLimit/);
    }
    expect(() =>
      idempotency({ store: memoryStore() }).route({ requestBodyLimit: -1 as number }),
    ).toThrow(/requestBodyLimit/);
  });
});
