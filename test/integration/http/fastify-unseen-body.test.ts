/**
 * A body Fastify read before the plugin but left nowhere: a `preParsing` hook that decompresses the
 * payload pipes `request.raw` into its own stream, and `@fastify/multipart` (whose parser only marks the
 * request and leaves `request.body` undefined) reads `request.raw` in the handler; or a parser that keeps
 * what it parsed on another property and calls `done(null)`. The plugin saw `request.raw` read and no
 * body, and fingerprinted the request without one: another body under the same key was replayed the
 * first one's answer. Such a request is now refused (500, nothing run or claimed), with what to change.
 */
import type { AddressInfo } from 'node:net';
import type { Readable } from 'node:stream';
import { createGunzip, gzipSync } from 'node:zlib';
import multipart from '@fastify/multipart';
import fastify, { type FastifyInstance } from 'fastify';
import { describe, expect, it, onTestFinished } from 'vitest';
import { type FastifyIdempotencyOptions, idempotencyPlugin } from '../../../src/fastify/index.js';
import { memoryStore, type Store } from '../../../src/index.js';

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

async function start(
  options: Partial<FastifyIdempotencyOptions>,
  routes: (app: FastifyInstance) => void,
): Promise<string> {
  const app = fastify({ forceCloseConnections: true });
  onTestFinished(() => app.close());
  await app.register(multipart);
  await app.register(idempotencyPlugin, { store: memoryStore(), key: 'required', ...options });
  // A decompression hook, as such hooks are written: it pipes the payload into gunzip at once.
  app.addHook('preParsing', async (request, _reply, payload) => {
    if (request.headers['content-encoding'] !== 'gzip') return payload;
    const decoded = payload.pipe(createGunzip()) as Readable & { receivedEncodedLength?: number };
    decoded.receivedEncodedLength = Number(request.headers['content-length']);
    return decoded;
  });
  routes(app);
  await app.listen({ port: 0, host: '127.0.0.1' });
  return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
}

/** How many times a handler ran in the current test. */
let runs = 0;

/** A gzipped multipart form with one file, and its content type (with the boundary). */
async function gzippedForm(file: string): Promise<{ body: Buffer; type: string }> {
  const form = new FormData();
  form.append('receipt', new Blob([file], { type: 'application/pdf' }), 'receipt.pdf');
  const request = new Request('http://localhost/', { method: 'POST', body: form });
  const bytes = Buffer.from(await request.arrayBuffer());
  return { body: gzipSync(bytes), type: request.headers.get('content-type') ?? '' };
}

async function post(url: string, key: string, body: Buffer | string, type: string, gzip = true) {
  const response = await fetch(`${url}/evidence`, {
    method: 'POST',
    headers: {
      'idempotency-key': key,
      'content-type': type,
      ...(gzip ? { 'content-encoding': 'gzip' } : {}),
    },
    body,
  });
  return { status: response.status, body: (await response.json()) as { message?: string } };
}

describe('Fastify: a body read before the plugin and left nowhere', () => {
  it('refuses a gzipped @fastify/multipart upload behind a decompression hook (500), runs and claims nothing', async () => {
    // Arrange
    runs = 0;
    const { store, seen } = fingerprinting();
    const url = await start({ store }, (app) => {
      app.post('/evidence', async (request, reply) => {
        runs++;
        const file = await request.file();
        return reply.code(201).send({ got: file === undefined ? null : await file.toBuffer() });
      });
    });
    const form = await gzippedForm('AAAA');
    // Act
    const answer = await post(url, 'k-upload', form.body, form.type);
    // Assert
    expect(answer.status).toBe(500);
    expect(answer.body.message).toContain('request.body undefined');
    expect(answer.body.message).toContain('POST /evidence');
    expect(runs).toBe(0);
    expect(seen).toEqual([]);
  });

  it('refuses a body a parser kept elsewhere than in request.body (500), and not with requestBodyLimit: false', async () => {
    // Arrange: the parser keeps the parsed order on its own property
    runs = 0;
    const routes = (app: FastifyInstance) => {
      app.addContentTypeParser('application/xml', { parseAs: 'string' }, (request, text, done) => {
        (request as { order?: unknown }).order = text;
        done(null);
      });
      app.post('/evidence', async (request, reply) => {
        runs++;
        return reply.code(201).send({ order: (request as { order?: unknown }).order });
      });
    };
    const strict = await start({}, routes);
    const digest = await start(
      { requestBodyLimit: false, fingerprintHeaders: ['content-digest'] },
      routes,
    );
    // Act
    const refused = await post(strict, 'k-xml', '<order id="1"/>', 'application/xml', false);
    const allowed = await post(digest, 'k-xml', '<order id="1"/>', 'application/xml', false);
    // Assert
    expect(refused.status).toBe(500);
    expect(allowed.status).toBe(201);
    expect(runs).toBe(1);
  });

  it('leaves bodies a parser read alone: a gzipped JSON body behind the same hook is fingerprinted as parsed', async () => {
    runs = 0;
    const url = await start({}, (app) => {
      app.post('/evidence', async (request, reply) => {
        runs++;
        return reply.code(201).send({ runs, body: request.body });
      });
    });
    const first = await post(url, 'k-json', gzipSync('{"amount":10}'), 'application/json');
    const retry = await post(url, 'k-json', gzipSync('{ "amount": 10 }'), 'application/json');
    const other = await post(url, 'k-json', gzipSync('{"amount":99}'), 'application/json');
    expect([first.status, retry.status, other.status]).toEqual([201, 201, 422]);
    expect(runs).toBe(1);
  });
});
