/**
 * A body handed on as a stream before the layer: on Fastify, a `preParsing` hook that decompresses the
 * payload (it pipes `request.raw` into a gunzip stream) and a content-type parser that passes that stream
 * on as `request.body` (`done(null, payload)`); on Express, a middleware that sets `req.body` to such a
 * stream. `request.raw` is then being read, so the layer did not read it, and it fingerprinted the
 * stream object: its fields (buffers, counters) differ from one request to the next, so a retry of the
 * same body was a 422, and two different bodies could fingerprint alike. The layer now reads the stream
 * (up to `requestBodyLimit`) and hands the handler a stream of the same bytes.
 */
import type { AddressInfo } from 'node:net';
import type { Readable } from 'node:stream';
import { createGunzip, gzipSync } from 'node:zlib';
import express from 'express';
import express4 from 'express4';
import fastify from 'fastify';
import { describe, expect, it, onTestFinished } from 'vitest';
import { idempotency } from '../../../src/express/index.js';
import { idempotencyPlugin } from '../../../src/fastify/index.js';
import { memoryStore } from '../../../src/index.js';
import { listenExpress } from '../../helpers/listen-express.js';

const LIMIT = 64;

async function text(stream: Readable): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString();
}

/** Fastify with a gunzip preParsing hook and a parser that hands the decoded stream to the handler. */
async function startFastify(): Promise<string> {
  const app = fastify({ forceCloseConnections: true });
  onTestFinished(() => app.close());
  await app.register(idempotencyPlugin, {
    store: memoryStore(),
    key: 'required',
    requestBodyLimit: LIMIT,
  });
  app.addHook('preParsing', async (request, _reply, payload) => {
    if (request.headers['content-encoding'] !== 'gzip') return payload;
    const decoded = payload.pipe(createGunzip()) as Readable & { receivedEncodedLength?: number };
    // What Fastify compares with the Content-Length, as a decompression hook reports it.
    decoded.receivedEncodedLength = Number(request.headers['content-length']);
    return decoded;
  });
  app.addContentTypeParser('application/octet-stream', (_request, payload, done) =>
    done(null, payload),
  );
  let n = 0;
  app.post('/imports', async (request, reply) =>
    reply.code(201).send({ n: ++n, got: await text(request.body as Readable) }),
  );
  await app.listen({ port: 0, host: '127.0.0.1' });
  return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
}

/** Express with a middleware that sets `req.body` to the gunzipped request stream. */
function startExpress(framework: typeof express | typeof express4): () => Promise<string> {
  return () => {
    const app = framework();
    app.use((req, _res, next) => {
      req.body = req.pipe(createGunzip());
      next();
    });
    app.use(idempotency({ store: memoryStore(), key: 'required', requestBodyLimit: LIMIT }));
    let n = 0;
    app.post('/imports', async (req, res) => {
      res.status(201).json({ n: ++n, got: await text(req.body as Readable) });
    });
    return listenExpress(app);
  };
}

async function post(url: string, key: string, content: string) {
  const response = await fetch(`${url}/imports`, {
    method: 'POST',
    headers: {
      'idempotency-key': key,
      'content-type': 'application/octet-stream',
      'content-encoding': 'gzip',
    },
    body: gzipSync(content),
  });
  return {
    status: response.status,
    replayed: response.headers.get('idempotent-replayed'),
    body: (await response.json()) as { n?: number; got?: string; code?: string },
  };
}

describe.each([
  ['fastify', startFastify],
  ['express 5', startExpress(express)],
  ['express 4', startExpress(express4)],
])('a body handed on as a stream (%s)', (_name, start) => {
  it('replays a retry of the same body, refuses another body under the key with 422', async () => {
    // Arrange
    const url = await start();
    const first = await post(url, 'k-import', 'rows: 1, 2, 3');
    // Act
    const retry = await post(url, 'k-import', 'rows: 1, 2, 3');
    const other = await post(url, 'k-import', 'rows: 4, 5, 6');
    // Assert: the handler read the whole body from the stream it was handed
    expect(first).toMatchObject({ status: 201, body: { n: 1, got: 'rows: 1, 2, 3' } });
    expect(retry).toMatchObject({ status: 201, replayed: 'true', body: first.body });
    expect(other.status).toBe(422);
  });

  it('refuses a decoded body over requestBodyLimit with 413, nothing run', async () => {
    const url = await start();
    const large = await post(url, 'k-large', 'x'.repeat(LIMIT + 1));
    const fits = await post(url, 'k-fits', 'x'.repeat(LIMIT));
    expect(large).toMatchObject({ status: 413, body: { code: 'request_too_large' } });
    expect(fits).toMatchObject({ status: 201, body: { n: 1 } });
  });
});
