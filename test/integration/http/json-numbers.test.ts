/**
 * Int64 ids in JSON bodies: `{"account":9223372036854775807}` and `{"account":9223372036854775806}` parse
 * to one double, as do the decimals `0.10000000000000001` and `0.1`. A key reused for the other account must get 422, never the first account's response. On
 * every adapter, with the JSON text reaching the layer (fetch and Hono always; Express through
 * `express.json({ verify: keepRawBody })` keeping `req.rawBody`; Fastify through a parser keeping `request.rawBody`, or
 * through the plugin keeping the text of its own parser's body).
 */
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import express from 'express';
import express4 from 'express4';
import fastify from 'fastify';
import { Hono } from 'hono';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idempotency as expressIdempotency, keepRawBody } from '../../../src/express/index.js';
import { idempotencyPlugin } from '../../../src/fastify/index.js';
import { withIdempotency } from '../../../src/fetch/index.js';
import { idempotency as honoIdempotency } from '../../../src/hono/index.js';
import { memoryStore } from '../../../src/index.js';
import { listenFetch } from '../../helpers/listen-fetch.js';

interface TransferServer {
  url: string;
  /** How many times the handler ran. */
  executions(): number;
  close(): Promise<void>;
}

async function startExpress(framework: typeof express): Promise<TransferServer> {
  let executions = 0;
  const app = framework();
  app.use(framework.json({ verify: keepRawBody }));
  app.use(expressIdempotency({ store: memoryStore(), key: 'required' }));
  app.post('/transfers', (_req, res) => {
    executions++;
    res.status(201).json({ id: randomUUID() });
  });
  const server = app.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/transfers`,
    executions: () => executions,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

async function startFastify(): Promise<TransferServer> {
  let executions = 0;
  const app = fastify();
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    (request as typeof request & { rawBody?: string }).rawBody = body as string;
    try {
      done(null, JSON.parse(body as string));
    } catch (error) {
      done(error as Error, undefined);
    }
  });
  await app.register(idempotencyPlugin, { store: memoryStore(), key: 'required' });
  app.post('/transfers', async (_request, reply) => {
    executions++;
    reply.code(201);
    return { id: randomUUID() };
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  return {
    url: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/transfers`,
    executions: () => executions,
    close: () => app.close(),
  };
}

// Fastify's own JSON parser, no text kept by the app: the plugin keeps it (`keepJsonText`).
async function startFastifyOwnParser(): Promise<TransferServer> {
  let executions = 0;
  const app = fastify();
  await app.register(idempotencyPlugin, {
    store: memoryStore(),
    key: 'required',
    keepJsonText: true,
  });
  app.post('/transfers', async (request, reply) => {
    executions++;
    reply.code(201);
    // The handler still gets the parsed body.
    return { id: randomUUID(), amount: (request.body as { amount?: unknown }).amount };
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  return {
    url: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/transfers`,
    executions: () => executions,
    close: () => app.close(),
  };
}

async function startFetch(): Promise<TransferServer> {
  let executions = 0;
  const handler = withIdempotency(
    async () => {
      executions++;
      return Response.json({ id: randomUUID() }, { status: 201 });
    },
    { store: memoryStore(), key: 'required' },
  );
  return { ...(await listenFetch(handler, '/transfers')), executions: () => executions };
}

async function startHono(): Promise<TransferServer> {
  let executions = 0;
  const app = new Hono();
  app.use('/transfers', honoIdempotency({ store: memoryStore(), key: 'required' }));
  app.post('/transfers', (c) => {
    executions++;
    return c.json({ id: randomUUID() }, 201);
  });
  return { ...(await listenFetch(app.fetch, '/transfers')), executions: () => executions };
}

describe.each([
  ['express (express.json({ verify: keepRawBody }))', () => startExpress(express)],
  ['express 4 (express.json({ verify: keepRawBody }))', () => startExpress(express4)],
  ['fastify (parser → request.rawBody)', startFastify],
  ['fastify (its own JSON parser, keepJsonText: true)', startFastifyOwnParser],
  ['fetch', startFetch],
  ['hono', startHono],
])('int64 ids in JSON bodies on %s', (_name, start) => {
  let server: TransferServer;
  beforeAll(async () => {
    server = await start();
  });
  afterAll(async () => {
    await server?.close();
  });

  const transfer = (key: string, body: string) =>
    fetch(server.url, {
      method: 'POST',
      headers: { 'idempotency-key': key, 'content-type': 'application/json' },
      body,
    });

  it('answers 422 to another account under the same key, and replays the same transfer in any key order', async () => {
    // Arrange
    const key = randomUUID();
    const before = server.executions();
    // Act
    const first = await transfer(key, '{"account":9223372036854775807,"amount":100}');
    const otherAccount = await transfer(key, '{"account":9223372036854775806,"amount":100}');
    const retry = await transfer(key, '{"amount":100, "account":9223372036854775807}');
    // Assert
    expect(first.status).toBe(201);
    expect(otherAccount.status).toBe(422);
    expect(otherAccount.headers.get('content-type')).toBe('application/problem+json');
    expect(retry.status).toBe(201);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(await retry.json()).toEqual(await first.json());
    expect(server.executions() - before).toBe(1);
  });

  it('answers 422 to an amount that differs only past the 15th digit (a decimal type, not a double)', async () => {
    // Arrange: both amounts parse to the double 0.1
    const key = randomUUID();
    const before = server.executions();
    // Act
    const first = await transfer(key, '{"account":42,"amount":0.10000000000000001}');
    const otherAmount = await transfer(key, '{"account":42,"amount":0.1}');
    const retry = await transfer(key, '{"account":42,"amount":1.0000000000000001e-1}');
    // Assert
    expect(first.status).toBe(201);
    expect(otherAmount.status).toBe(422);
    expect(retry.status).toBe(201);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(server.executions() - before).toBe(1);
  });
});
