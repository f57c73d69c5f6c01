/**
 * A body the app kept only as `rawBody`: an Express middleware that reads the stream into `req.rawBody`
 * (the usual way to check a webhook's signature over its exact bytes), a Fastify content-type parser that
 * keeps the text and calls `done(null)`. The stream is read, nothing is left in the parsed body, and the
 * fingerprint read `rawBody` for JSON bodies only: two XML bodies under one key fingerprinted alike, and
 * the second was replayed the first one's answer. The kept bytes are now the body whenever the parsed
 * body is empty. Bodies a parser did parse keep the fingerprints they had.
 */
import type { AddressInfo } from 'node:net';
import express from 'express';
import express4 from 'express4';
import fastify from 'fastify';
import { describe, expect, it, onTestFinished } from 'vitest';
import { idempotency, keepRawBody } from '../../../src/express/index.js';
import { idempotencyPlugin } from '../../../src/fastify/index.js';
import { memoryStore, type Store } from '../../../src/index.js';
import { listenExpress } from '../../helpers/listen-express.js';

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

type Framework = typeof express | typeof express4;

/**
 * Express with a middleware that keeps the bytes of XML bodies as `req.rawBody` and parses nothing, and
 * `express.urlencoded()` that keeps them too (its `verify`) beside the fields it parses.
 */
async function startExpress(framework: Framework, store: Store): Promise<string> {
  const app = framework();
  app.use((req, _res, next) => {
    if (req.headers['content-type'] !== 'application/xml') return next();
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      (req as { rawBody?: Buffer }).rawBody = Buffer.concat(chunks);
      next();
    });
  });
  app.use(express.urlencoded({ extended: false, verify: keepRawBody }));
  app.use(idempotency({ store, key: 'required' }));
  let n = 0;
  app.post('/webhooks', (req, res) => {
    res.status(201).json({ n: ++n, got: String((req as { rawBody?: Buffer }).rawBody) });
  });
  return listenExpress(app);
}

/** Fastify with an XML parser that keeps the text as `request.rawBody` and leaves the body empty. */
async function startFastify(store: Store): Promise<string> {
  const app = fastify();
  onTestFinished(() => app.close());
  await app.register(idempotencyPlugin, { store, key: 'required' });
  app.addContentTypeParser('application/xml', { parseAs: 'string' }, (request, text, done) => {
    (request as { rawBody?: unknown }).rawBody = text;
    done(null);
  });
  let n = 0;
  app.post('/webhooks', async (request, reply) =>
    reply.code(201).send({ n: ++n, got: (request as { rawBody?: unknown }).rawBody }),
  );
  await app.listen({ port: 0, host: '127.0.0.1' });
  return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
}

async function post(url: string, key: string, body: string, type = 'application/xml') {
  const response = await fetch(`${url}/webhooks`, {
    method: 'POST',
    headers: { 'idempotency-key': key, 'content-type': type },
    body,
  });
  return {
    status: response.status,
    replayed: response.headers.get('idempotent-replayed'),
    body: (await response.json()) as { n?: number; got?: string },
  };
}

describe.each([
  ['express 5', (store: Store) => startExpress(express, store)],
  ['express 4', (store: Store) => startExpress(express4, store)],
  ['fastify', startFastify],
])('a body kept only as rawBody (%s)', (_name, start) => {
  it('refuses another body under the key with 422, and replays the same one', async () => {
    // Arrange
    const url = await start(fingerprinting().store);
    const first = await post(url, 'k-xml', '<refund amount="10"/>');
    // Act
    const retry = await post(url, 'k-xml', '<refund amount="10"/>');
    const other = await post(url, 'k-xml', '<refund amount="99"/>');
    // Assert
    expect(first).toMatchObject({ status: 201, body: { n: 1, got: '<refund amount="10"/>' } });
    expect(retry).toMatchObject({ status: 201, replayed: 'true', body: first.body });
    expect(other.status).toBe(422);
  });
});

describe('a parsed body beside a kept rawBody', () => {
  it('keeps the fingerprint of a urlencoded body the parser read (the parsed fields, as before)', async () => {
    // Arrange: the raw text differs (order of the fields), the parsed fields are the same
    const { store, seen } = fingerprinting();
    const url = await startExpress(express, store);
    // Act
    await post(url, 'k-form-1', 'a=1&b=2', 'application/x-www-form-urlencoded');
    await post(url, 'k-form-2', 'b=2&a=1', 'application/x-www-form-urlencoded');
    // Assert: the form's fields, not the kept bytes, as fingerprinted before
    expect(seen).toHaveLength(2);
    expect(seen[0]).toBe(seen[1]);
  });
});
