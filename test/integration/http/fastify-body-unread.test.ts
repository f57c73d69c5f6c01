/**
 * Request bodies Fastify leaves unread before the plugin's claim: `@fastify/multipart`'s content-type
 * parser only marks the request, and `request.file()` in the handler reads `request.raw` itself; a parser
 * of the app's may do the same (`done(null, payload)`). The plugin reads such a body (up to
 * `requestBodyLimit`) so that the fingerprint covers it, and hands the bytes back to `request.raw` for the
 * handler; a larger one is refused (413). Bodies Fastify parsed keep the fingerprints they had.
 */
import { createHash, randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import multipart from '@fastify/multipart';
import fastify, { type FastifyInstance, type FastifyRequest } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { type FastifyIdempotencyOptions, idempotencyPlugin } from '../../../src/fastify/index.js';
import { httpFingerprint } from '../../../src/http/index.js';
import { memoryStore, type Store } from '../../../src/index.js';

let app: FastifyInstance | undefined;
afterEach(async () => {
  await app?.close();
  app = undefined;
});

/** A Fastify app with the plugin (`options` over a memory store) and `@fastify/multipart`. */
async function start(
  options: Partial<FastifyIdempotencyOptions> = {},
  routes: (app: FastifyInstance) => void = () => {},
): Promise<string> {
  // Every connection closed at the end: one whose body a refused request left unsent is never idle.
  app = fastify({ forceCloseConnections: true });
  await app.register(multipart);
  await app.register(idempotencyPlugin, { store: memoryStore(), ...options });
  routes(app);
  await app.listen({ port: 0, host: '127.0.0.1' });
  return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
}

/** A store that keeps the fingerprint of each claim (claims arrive one by one on the memory store). */
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

/** A dispute's evidence form: fetch picks a new random boundary on each call. */
function evidence(file: string): FormData {
  const form = new FormData();
  form.append('dispute', 'dp_1');
  form.append('evidence', new Blob([file], { type: 'application/pdf' }), 'receipt.pdf');
  return form;
}

/** A body sent chunked (no Content-Length) in `chunks`, one per pull. */
function chunkedBody(chunks: Uint8Array[]): RequestInit {
  const queue = [...chunks];
  const body = new ReadableStream<Uint8Array>({
    pull(controller) {
      const next = queue.shift();
      if (next === undefined) controller.close();
      else controller.enqueue(next);
    },
  });
  return { body, duplex: 'half' } as RequestInit;
}

const sha256 = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');

/** A route that keeps the raw stream for its handler, as @fastify/multipart does for multipart forms. */
function streamParser(app: FastifyInstance): void {
  app.addContentTypeParser('application/octet-stream', (_request, _payload, done) => done(null));
}

async function rawBytes(request: FastifyRequest): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of request.raw) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

describe('Fastify: a body the content-type parser left for the handler', () => {
  it('fingerprints a @fastify/multipart upload: a retried form replays, another file under the key is 422', async () => {
    // Arrange: the handler reads the file with request.file(), as @fastify/multipart's docs show.
    const files: string[] = [];
    const base = await start({}, (app) =>
      app.post('/evidence', async (request, reply) => {
        const file = await request.file();
        const bytes = await file!.toBuffer();
        files.push(bytes.toString('utf8'));
        return reply.code(201).send({ file: bytes.toString('utf8') });
      }),
    );
    const key = randomUUID();
    const upload = (file: string) =>
      fetch(`${base}/evidence`, {
        method: 'POST',
        headers: { 'idempotency-key': key },
        body: evidence(file),
      });
    const alice = '%PDF receipt of alice';
    // Act
    const first = await upload(alice);
    const retry = await upload(alice);
    const mallory = await upload('%PDF receipt of mallory');
    // Assert: Mallory's file is refused, never answered with Alice's (201, replayed, before the fix).
    expect([first.status, retry.status, mallory.status]).toEqual([201, 201, 422]);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(await retry.json()).toEqual({ file: alice });
    expect(await mallory.json()).toMatchObject({ code: 'key_mismatch' });
    expect(files).toEqual([alice]);
  });

  it('hands a chunked body that arrives in many pieces back whole to request.raw, in order', async () => {
    // Arrange
    const base = await start({}, (app) => {
      streamParser(app);
      app.post('/blobs', async (request, reply) =>
        reply.code(201).send({ sha256: sha256(await rawBytes(request)) }),
      );
    });
    const chunks = Array.from({ length: 12 }, (_, i) => new Uint8Array(64 * 1024).fill(i + 1));
    const headers = { 'idempotency-key': randomUUID(), 'content-type': 'application/octet-stream' };
    const post = (body: Uint8Array[]) =>
      fetch(`${base}/blobs`, { method: 'POST', headers, ...chunkedBody(body) });
    // Act
    const first = await post(chunks);
    const other = await post(chunks.map((c, i) => (i === 11 ? new Uint8Array(c.length) : c)));
    // Assert
    expect(first.status).toBe(201);
    expect(await first.json()).toEqual({ sha256: sha256(Buffer.concat(chunks)) });
    expect(other.status).toBe(422);
  });

  it('refuses a body over requestBodyLimit with 413 request_too_large, runs and stores nothing', async () => {
    // Arrange: the plugin's limit, and a route of its own with a smaller one.
    let runs = 0;
    const base = await start({ requestBodyLimit: 2048 }, (app) => {
      streamParser(app);
      const handler = async (request: FastifyRequest) => {
        runs++;
        return { bytes: (await rawBytes(request)).byteLength };
      };
      app.post('/blobs', handler);
      app.post('/small', { config: { idempotency: { requestBodyLimit: 1024 } } }, handler);
    });
    const headers = { 'idempotency-key': randomUUID(), 'content-type': 'application/octet-stream' };
    const post = (path: string, init: RequestInit) =>
      fetch(`${base}${path}`, { method: 'POST', headers, ...init });
    // Act: one announced by its Content-Length, one chunked that goes over as it arrives.
    const announced = await post('/blobs', { body: new Uint8Array(2049) });
    const chunked = await post('/blobs', chunkedBody([new Uint8Array(1500), new Uint8Array(1500)]));
    const route = await post('/small', { body: new Uint8Array(1025) });
    const small = await post('/blobs', { body: new Uint8Array(2048) });
    // Assert
    expect(announced.status).toBe(413);
    expect(announced.headers.get('content-type')).toBe('application/problem+json');
    expect(await announced.json()).toMatchObject({ status: 413, code: 'request_too_large' });
    expect(chunked.status).toBe(413);
    expect(await chunked.json()).toMatchObject({ code: 'request_too_large' });
    expect(route.status).toBe(413);
    expect(small.status).toBe(200);
    expect(await small.json()).toEqual({ bytes: 2048 });
    expect(runs).toBe(1);
  });

  it('with requestBodyLimit: false, leaves the body to the handler and fingerprints the digest header', async () => {
    // Arrange
    const base = await start(
      { requestBodyLimit: false, fingerprintHeaders: ['content-digest'] },
      (app) => {
        streamParser(app);
        app.post('/videos', async (request, reply) =>
          reply.code(201).send({ sha256: sha256(await rawBytes(request)) }),
        );
      },
    );
    const key = randomUUID();
    const video = new Uint8Array(2 * 1024 * 1024).fill(7);
    const headers = { 'idempotency-key': key, 'content-type': 'application/octet-stream' };
    const post = (digest: string, body: Uint8Array) =>
      fetch(`${base}/videos`, {
        method: 'POST',
        headers: { ...headers, 'content-digest': digest },
        body,
      });
    // Act: under one digest, other bytes are the same request; another digest is another request.
    const first = await post('sha-256=:one:', video);
    const sameDigest = await post('sha-256=:one:', new Uint8Array(10));
    const otherDigest = await post('sha-256=:two:', video);
    // Assert
    expect(await first.json()).toEqual({ sha256: sha256(video) });
    expect(sameDigest.headers.get('idempotent-replayed')).toBe('true');
    expect(otherDigest.status).toBe(422);
  });

  it('keeps the fingerprints of bodies Fastify parsed, and of requests without a body', async () => {
    // Arrange
    const { store, seen } = fingerprinting();
    const bodies: unknown[] = [];
    const base = await start({ store }, (app) =>
      app.post('/orders', async (request, reply) => {
        bodies.push(request.body);
        return reply.code(201).send();
      }),
    );
    const post = (headers: Record<string, string>, body?: string) =>
      fetch(`${base}/orders`, {
        method: 'POST',
        headers: { 'idempotency-key': randomUUID(), ...headers },
        body,
      });
    // Act: no body, a JSON body, a text body (both parsed by Fastify).
    await post({});
    await post({ 'content-type': 'application/json' }, '{"b":1,"a":2}');
    await post({ 'content-type': 'text/plain' }, 'pay alice 10');
    // Assert: what Fastify made of each, as the plugin always fingerprinted it.
    const expected = [undefined, 'application/json', 'text/plain'].map((contentType, i) =>
      httpFingerprint({ method: 'POST', path: '/orders', query: '', contentType, body: bodies[i] }),
    );
    expect(bodies).toEqual([undefined, { a: 2, b: 1 }, 'pay alice 10']);
    expect(seen).toEqual(expected);
  });

  it('with keepJsonText, still fingerprints the JSON text Fastify parsed (int64 ids stay apart)', async () => {
    // Arrange
    const { store, seen } = fingerprinting();
    const base = await start({ store, keepJsonText: true }, (app) =>
      app.post('/payouts', async (_request, reply) => reply.code(201).send({ ok: true })),
    );
    const key = randomUUID();
    const post = (body: string) =>
      fetch(`${base}/payouts`, {
        method: 'POST',
        headers: { 'idempotency-key': key, 'content-type': 'application/json' },
        body,
      });
    const text = '{"account":9223372036854775807}';
    // Act
    const first = await post(text);
    const other = await post('{"account":9223372036854775806}');
    // Assert
    expect(first.status).toBe(201);
    expect(other.status).toBe(422);
    expect(seen[0]).toBe(
      httpFingerprint({
        method: 'POST',
        path: '/payouts',
        query: '',
        contentType: 'application/json',
        body: JSON.parse(text) as unknown,
        rawBody: Buffer.from(text),
      }),
    );
  });

  it('claims nothing for a client that goes away mid-body', async () => {
    // Arrange
    let runs = 0;
    const base = await start({}, (app) => {
      streamParser(app);
      app.post('/blobs', async (request) => {
        runs++;
        return { bytes: (await rawBytes(request)).byteLength };
      });
    });
    const key = randomUUID();
    const headers = { 'idempotency-key': key, 'content-type': 'application/octet-stream' };
    const gone = new AbortController();
    // Act: one chunk of a chunked body, then the client goes away.
    const partial = fetch(`${base}/blobs`, {
      method: 'POST',
      headers,
      signal: gone.signal,
      // One chunk, and the stream never closes: the body is never complete.
      body: new ReadableStream<Uint8Array>({
        start: (controller) => controller.enqueue(new Uint8Array(10)),
      }),
      duplex: 'half',
    } as RequestInit).catch(() => undefined);
    await new Promise((done) => setTimeout(done, 50));
    gone.abort();
    await partial;
    await new Promise((done) => setTimeout(done, 50));
    const whole = await fetch(`${base}/blobs`, {
      method: 'POST',
      headers,
      body: new Uint8Array(100),
    });
    // Assert
    expect(whole.status).toBe(200);
    expect(await whole.json()).toEqual({ bytes: 100 });
    expect(runs).toBe(1);
  });

  it('refuses a requestBodyLimit that is not a byte count or false', async () => {
    // Arrange
    app = fastify();
    // Act / Assert
    await expect(
      app.register(idempotencyPlugin, {
        store: memoryStore(),
        requestBodyLimit: '1mb' as unknown as number,
      }),
    ).rejects.toThrow(/requestBodyLimit/);
  });
});
