/**
 * An async Fastify handler that answers with `reply.send(x)` and returns nothing (no `return reply`), a
 * style Fastify runs without the plugin. Fastify sends what the handler's promise resolves with once it
 * resolves, unless the reply has ended by then; the plugin's capture holds the end until the outcome is
 * stored, so Fastify sent `undefined` as a second answer, which went out first: the client got an empty
 * body (`Content-Length: 0`) while the handler's body was stored and replayed to its retry. The first
 * response must be the handler's, the same as its replay.
 */
import type { AddressInfo } from 'node:net';
import fastify, { type FastifyInstance } from 'fastify';
import { afterEach, expect, it } from 'vitest';
import { idempotencyPlugin } from '../../../src/fastify/index.js';
import { memoryStore } from '../../../src/index.js';

let app: FastifyInstance | undefined;
afterEach(async () => {
  await app?.close();
  app = undefined;
});

/** Status, content type, body text and replay mark of a POST with the key. */
async function post(base: string, path: string, key: string) {
  const response = await fetch(`${base}${path}`, {
    method: 'POST',
    headers: { 'idempotency-key': key },
  });
  return {
    status: response.status,
    type: response.headers.get('content-type'),
    body: await response.text(),
    replayed: response.headers.get('idempotent-replayed'),
  };
}

it.each([
  ['an object', '/object', '{"id":"ch_1"}'],
  ['a JSON text', '/json-text', '{"id":"ch_1"}'],
  ['a number', '/number', '42'],
  ['null', '/null', 'null'],
  ['an object after an await', '/awaited', '{"id":"ch_1"}'],
])(
  'an async handler that sends %s without returning the reply: the client gets it, and its retry the same bytes',
  async (_name, path, expected) => {
    // Arrange
    let runs = 0;
    app = fastify();
    await app.register(idempotencyPlugin, { store: memoryStore(), key: 'required' });
    app.post('/object', async (_request, reply) => {
      runs++;
      reply.code(201).send({ id: 'ch_1' });
    });
    app.post('/json-text', async (_request, reply) => {
      runs++;
      reply.code(201).type('application/json').send('{"id":"ch_1"}');
    });
    app.post('/number', async (_request, reply) => {
      runs++;
      reply.code(201).send(42);
    });
    app.post('/null', async (_request, reply) => {
      runs++;
      reply.code(201).send(null);
    });
    app.post('/awaited', async (_request, reply) => {
      runs++;
      await new Promise((resolve) => setTimeout(resolve, 5));
      reply.code(201).send({ id: 'ch_1' });
    });
    await app.listen({ port: 0, host: '127.0.0.1' });
    const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    // Act
    const first = await post(base, path, 'k');
    const retry = await post(base, path, 'k');
    // Assert
    expect(first).toEqual({
      status: 201,
      type: 'application/json; charset=utf-8',
      body: expected,
      replayed: null,
    });
    expect(retry).toEqual({ ...first, replayed: 'true' });
    expect(runs).toBe(1);
  },
);

it('a handler that sends and also returns a value: the sent answer goes out and is the one replayed, as without the plugin', async () => {
  // Arrange
  let runs = 0;
  app = fastify();
  await app.register(idempotencyPlugin, { store: memoryStore(), key: 'required' });
  app.post('/async', async (_request, reply) => {
    runs++;
    reply.code(201).send({ id: 'ch_1' });
    return { id: 'ch_2' };
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  // Act
  const first = await post(base, '/async', 'k');
  const retry = await post(base, '/async', 'k');
  // Assert
  expect(first).toMatchObject({ status: 201, body: '{"id":"ch_1"}', replayed: null });
  expect(retry).toEqual({ ...first, replayed: 'true' });
  expect(runs).toBe(1);
});

it.each([
  ['an onSend hook after the plugin throws', 'hook'],
  ['a web Response body fails on its first read', 'stream'],
])(
  'a custom error handler’s page still goes out when %s after the handler answered',
  async (_, mode) => {
    // Arrange: an error handler that answers with a plain object, as most do.
    app = fastify();
    app.setErrorHandler((error, _request, reply) => {
      reply.code(500).send({ message: `custom: ${(error as Error).message}` });
    });
    await app.register(idempotencyPlugin, { store: memoryStore(), key: 'required' });
    if (mode === 'hook') {
      app.addHook('onSend', async () => {
        throw new Error('signing failed');
      });
    }
    app.post('/pay', async (_request, reply) => {
      if (mode === 'stream') {
        const body = new ReadableStream({
          pull() {
            throw new Error('first read fails');
          },
        });
        return reply.send(new Response(body, { status: 201 }));
      }
      return { ok: true };
    });
    await app.listen({ port: 0, host: '127.0.0.1' });
    const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    // Act: before, the page was taken for the handler answering twice and dropped: no response at all.
    const response = await fetch(`${base}/pay`, {
      method: 'POST',
      headers: { 'idempotency-key': mode },
      signal: AbortSignal.timeout(3000),
    });
    // Assert: an error's page (the custom one, or Fastify's own for an onSend hook's error).
    expect(response.status).toBe(500);
    expect(await response.json()).toMatchObject({ message: expect.any(String) });
  },
);
