/**
 * Fastify 5 sends a fetch `Response` and a web `ReadableStream` returned by a handler: the plugin stores
 * them with the status and headers that went out, replays them, and releases the key of a `Response` with
 * a 5xx status, as for any other payload.
 */
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { idempotencyPlugin } from '../../../src/fastify/index.js';
import { memoryStore } from '../../../src/index.js';

const runs = new Map<string, number>();
const count = (tag: string) => {
  const n = (runs.get(tag) ?? 0) + 1;
  runs.set(tag, n);
  return n;
};

let app: FastifyInstance;
let base: string;

beforeAll(async () => {
  app = fastify();
  await app.register(idempotencyPlugin, { store: memoryStore(), replayHeaders: ['x-charge'] });
  app.post('/response', async (request) => {
    const n = count(request.headers['x-tag'] as string);
    const headers = new Headers({ 'content-type': 'application/json', location: `/charges/${n}` });
    headers.append('set-cookie', 'seen=1');
    headers.set('x-charge', `ch_${n}`);
    return new Response(JSON.stringify({ n, id: randomUUID() }), { status: 201, headers });
  });
  app.post('/response-5xx', async (request) => {
    const n = count(request.headers['x-tag'] as string);
    return new Response(JSON.stringify({ n }), { status: n === 1 ? 503 : 201 });
  });
  app.post('/response-empty', async (request) => {
    count(request.headers['x-tag'] as string);
    return new Response(null, { status: 204 });
  });
  app.post('/web-stream', async (request, reply) => {
    const n = count(request.headers['x-tag'] as string);
    reply.code(201).header('content-type', 'text/csv');
    const rows = [`id,n\n`, `${randomUUID()},${n}\n`];
    return new ReadableStream<Uint8Array>({
      pull(controller) {
        const row = rows.shift();
        if (row === undefined) controller.close();
        else controller.enqueue(new TextEncoder().encode(row));
      },
    });
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await app?.close();
});

const post = async (path: string, key: string, tag: string) => {
  const response = await fetch(`${base}${path}`, {
    method: 'POST',
    headers: { 'idempotency-key': key, 'x-tag': tag },
  });
  return { status: response.status, headers: response.headers, text: await response.text() };
};

it('stores a returned Response with its status and headers, replays it, and sends it as Fastify does', async () => {
  const key = randomUUID();
  const tag = randomUUID();
  const first = await post('/response', key, tag);
  expect(first.status).toBe(201);
  expect(first.headers.get('location')).toBe('/charges/1');
  expect(first.headers.getSetCookie()).toEqual(['seen=1']);
  // Before, the retry got 409 response_too_large: a Response has no byteLength.
  const replay = await post('/response', key, tag);
  expect(replay.status).toBe(201);
  expect(replay.text).toBe(first.text);
  expect(replay.headers.get('idempotent-replayed')).toBe('true');
  expect(replay.headers.get('content-type')).toBe('application/json');
  expect(replay.headers.get('location')).toBe('/charges/1');
  expect(replay.headers.get('x-charge')).toBe('ch_1');
  expect(replay.headers.getSetCookie()).toEqual([]);
  expect(runs.get(tag)).toBe(1);
});

it('releases the key of a returned Response with a 5xx status, so the retry runs again', async () => {
  const key = randomUUID();
  const tag = randomUUID();
  const first = await post('/response-5xx', key, tag);
  expect(first.status).toBe(503);
  // Before, the 503 was taken for a 200 and kept (as too large): the retry got 409 and never ran.
  const retry = await post('/response-5xx', key, tag);
  expect(retry.status).toBe(201);
  expect(JSON.parse(retry.text)).toEqual({ n: 2 });
  expect(runs.get(tag)).toBe(2);
});

it('replays a returned Response without a body', async () => {
  const key = randomUUID();
  const tag = randomUUID();
  expect((await post('/response-empty', key, tag)).status).toBe(204);
  const replay = await post('/response-empty', key, tag);
  expect(replay.status).toBe(204);
  expect(replay.headers.get('idempotent-replayed')).toBe('true');
  expect(runs.get(tag)).toBe(1);
});

it('stores and replays a returned web ReadableStream as the concatenation of its chunks', async () => {
  const key = randomUUID();
  const tag = randomUUID();
  const first = await post('/web-stream', key, tag);
  expect(first.status).toBe(201);
  expect(first.text).toMatch(/^id,n\n[0-9a-f-]{36},1\n$/);
  const replay = await post('/web-stream', key, tag);
  expect(replay.status).toBe(201);
  expect(replay.text).toBe(first.text);
  expect(replay.headers.get('content-type')).toBe('text/csv');
  expect(replay.headers.get('idempotent-replayed')).toBe('true');
  expect(runs.get(tag)).toBe(1);
});
