/**
 * A CORS preflight is never the layer's, whatever `methods` says. A browser sends it before a request
 * with `Idempotency-Key`, without that header (it asks whether it may send it): on a route whose
 * `methods` include OPTIONS with `key: 'required'`, the layer answered `400 missing_key`, the browser
 * read that as a refused preflight and never sent the request. An OPTIONS request that is not a preflight
 * is covered as `methods` asks.
 */
import type { AddressInfo } from 'node:net';
import express from 'express';
import express4 from 'express4';
import fastify from 'fastify';
import { Hono } from 'hono';
import { describe, expect, it, onTestFinished } from 'vitest';
import { idempotency as expressIdempotency } from '../../../src/express/index.js';
import { idempotencyPlugin } from '../../../src/fastify/index.js';
import { withIdempotency } from '../../../src/fetch/index.js';
import { idempotency as honoIdempotency } from '../../../src/hono/index.js';
import { memoryStore } from '../../../src/index.js';
import { listenExpress } from '../../helpers/listen-express.js';
import { listenFetch } from '../../helpers/listen-fetch.js';

const policy = { methods: ['POST', 'OPTIONS'], key: 'required' } as const;

// The app's own preflight answer (a CORS middleware mounted after the layer, or a hand-written one).
const ALLOW = {
  'access-control-allow-origin': 'https://app.example',
  'access-control-allow-methods': 'POST',
  'access-control-allow-headers': 'idempotency-key, content-type',
};

async function expressUrl(framework: typeof express): Promise<string> {
  const app = framework();
  app.use(expressIdempotency({ store: memoryStore(), ...policy }));
  app.options('/orders', (_req, res) => {
    res.set(ALLOW).status(204).end();
  });
  return `${await listenExpress(app)}/orders`;
}

async function fastifyUrl(): Promise<string> {
  const app = fastify();
  await app.register(idempotencyPlugin, { store: memoryStore(), ...policy });
  app.options('/orders', async (_request, reply) => reply.headers(ALLOW).code(204).send());
  await app.listen({ port: 0, host: '127.0.0.1' });
  onTestFinished(() => app.close());
  return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/orders`;
}

async function fetchUrl(): Promise<string> {
  const handler = withIdempotency(async () => new Response(null, { status: 204, headers: ALLOW }), {
    store: memoryStore(),
    ...policy,
  });
  const server = await listenFetch(handler, '/orders');
  onTestFinished(() => server.close());
  return server.url;
}

async function honoUrl(): Promise<string> {
  const app = new Hono();
  app.use('*', honoIdempotency({ store: memoryStore(), ...policy }));
  app.options('/orders', (c) => c.body(null, 204, ALLOW));
  const server = await listenFetch(app.fetch, '/orders');
  onTestFinished(() => server.close());
  return server.url;
}

describe.each([
  ['Express 5', () => expressUrl(express)],
  ['Express 4', () => expressUrl(express4 as unknown as typeof express)],
  ['Fastify', fastifyUrl],
  ['fetch', fetchUrl],
  ['Hono', honoUrl],
])('%s: a route whose methods include OPTIONS, key required', (_name, start) => {
  it('lets a CORS preflight through to the app, without a key', async () => {
    const url = await start();
    const preflight = await fetch(url, {
      method: 'OPTIONS',
      headers: {
        origin: 'https://app.example',
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'idempotency-key, content-type',
      },
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get('access-control-allow-headers')).toBe(
      'idempotency-key, content-type',
    );
  });

  it('still requires the key on an OPTIONS request that is not a preflight', async () => {
    const url = await start();
    const plain = await fetch(url, { method: 'OPTIONS' });
    expect(plain.status).toBe(400);
    expect(((await plain.json()) as { code: string }).code).toBe('missing_key');
  });
});
