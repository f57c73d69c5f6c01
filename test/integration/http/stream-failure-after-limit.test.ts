/**
 * A response stream larger than `maxBodyBytes` is streamed through unbuffered, and its outcome is only
 * known at its end: a stream that fails after passing the limit keeps a `response_not_captured` marker (the
 * handler answered 200, so its work is done: a retry must not run it again), not the `response_too_large`
 * one of a body that was sent whole. One that ends keeps the `response_too_large` marker, stored before its
 * last bytes go out. On every adapter, over real sockets.
 */
import { randomUUID } from 'node:crypto';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import express from 'express';
import fastify, { type FastifyInstance } from 'fastify';
import { Hono } from 'hono';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idempotency as expressIdempotency } from '../../../src/express/index.js';
import { idempotencyPlugin } from '../../../src/fastify/index.js';
import { withIdempotency } from '../../../src/fetch/index.js';
import { idempotency as honoIdempotency } from '../../../src/hono/index.js';
import { memoryStore } from '../../../src/index.js';
import { type ListeningFetch, listenFetch } from '../../helpers/listen-fetch.js';

const LIMIT = 1000;
const CHUNK = 400; // four chunks: the limit is passed at the third, the stream fails after the fourth
const options = { store: memoryStore(), key: 'required', maxBodyBytes: LIMIT } as const;

const runs = new Map<string, number>();
const count = (key: string) => {
  const n = (runs.get(key) ?? 0) + 1;
  runs.set(key, n);
  return n;
};

// The body: four chunks, then an error on the first run when `fail` is set (the retry's stream ends).
async function* chunks(fail: boolean) {
  for (let i = 0; i < 4; i++) {
    await sleep(5);
    yield Buffer.alloc(CHUNK, 97 + i);
  }
  if (fail) throw new Error('upstream broke mid-stream');
}

const webStream = (fail: boolean) =>
  Readable.toWeb(Readable.from(chunks(fail))) as ReadableStream<Uint8Array>;

let expressServer: Server;
let fastifyApp: FastifyInstance;
let fetchServer: ListeningFetch;
let honoServer: ListeningFetch;
const bases: Record<string, string> = {};

beforeAll(async () => {
  const app = express();
  app.post('/stream', expressIdempotency(options), async (req, res, next) => {
    const n = count(String(req.headers['idempotency-key']));
    res.type('text/plain');
    // pipeline destroys the response with the source's error, as an app should stream.
    await pipeline(Readable.from(chunks(req.query.fail === '1' && n === 1)), res).catch(next);
  });
  expressServer = app.listen(0, '127.0.0.1');
  await new Promise((resolve) => expressServer.once('listening', resolve));
  bases.express = `http://127.0.0.1:${(expressServer.address() as AddressInfo).port}/stream`;

  fastifyApp = fastify();
  await fastifyApp.register(idempotencyPlugin, options);
  fastifyApp.post('/stream', async (request, reply) => {
    const n = count(String(request.headers['idempotency-key']));
    const fail = (request.query as { fail?: string }).fail === '1' && n === 1;
    reply.type('text/plain');
    return reply.send(Readable.from(chunks(fail)));
  });
  fastifyApp.post('/web-stream', async (request, reply) => {
    const n = count(String(request.headers['idempotency-key']));
    const fail = (request.query as { fail?: string }).fail === '1' && n === 1;
    reply.type('text/plain');
    return reply.send(webStream(fail));
  });
  await fastifyApp.listen({ port: 0, host: '127.0.0.1' });
  const fastifyBase = `http://127.0.0.1:${(fastifyApp.server.address() as AddressInfo).port}`;
  bases.fastify = `${fastifyBase}/stream`;
  bases['fastify (web stream)'] = `${fastifyBase}/web-stream`;

  const handler = withIdempotency(async (request: Request) => {
    const n = count(String(request.headers.get('idempotency-key')));
    const fail = new URL(request.url).searchParams.get('fail') === '1' && n === 1;
    return new Response(webStream(fail), { headers: { 'content-type': 'text/plain' } });
  }, options);
  fetchServer = await listenFetch(handler, '/stream');
  bases.fetch = fetchServer.url;

  const hono = new Hono();
  hono.post('/stream', honoIdempotency(options), (c) => {
    const n = count(String(c.req.header('idempotency-key')));
    const fail = c.req.query('fail') === '1' && n === 1;
    return new Response(webStream(fail), { headers: { 'content-type': 'text/plain' } });
  });
  honoServer = await listenFetch(hono.fetch, '/stream');
  bases.hono = honoServer.url;
});

afterAll(async () => {
  await new Promise((resolve) => expressServer?.close(resolve));
  await fastifyApp?.close();
  await fetchServer?.close();
  await honoServer?.close();
});

// The response as the client gets it: its status and body, or the error a cut body gives.
async function post(url: string, key: string) {
  const response = await fetch(url, { method: 'POST', headers: { 'idempotency-key': key } });
  try {
    return { status: response.status, body: await response.text() };
  } catch (error) {
    return { status: response.status, error };
  }
}

// A few tries: the failed run's marker is stored just after the client sees its body cut.
async function retry(url: string, key: string) {
  let answer = await post(url, key);
  for (let i = 0; i < 20 && answer.status === 409 && answer.body?.includes('in_progress'); i++) {
    await sleep(25);
    answer = await post(url, key);
  }
  return answer;
}

describe.each(['express', 'fastify', 'fastify (web stream)', 'fetch', 'hono'])('%s', (name) => {
  it('keeps a response_not_captured marker for a stream that fails after passing maxBodyBytes: never run again', async () => {
    const key = randomUUID();
    const first = await post(`${bases[name]}?fail=1`, key);
    expect(first.status).toBe(200);
    expect(first.error).toBeDefined(); // the body was cut
    const second = await retry(`${bases[name]}?fail=1`, key);
    expect(second.status).toBe(409);
    expect(JSON.parse(second.body ?? '{}').code).toBe('response_not_captured');
    const third = await post(`${bases[name]}?fail=1`, key);
    expect(JSON.parse(third.body ?? '{}').code).toBe('response_not_captured');
    expect(runs.get(key)).toBe(1);
  });

  it('keeps the response_too_large marker of a stream that ends, stored before its end goes out', async () => {
    const key = randomUUID();
    const first = await post(bases[name]!, key);
    expect(first.body).toHaveLength(4 * CHUNK);
    const second = await post(bases[name]!, key);
    expect(second.status).toBe(409);
    expect(JSON.parse(second.body ?? '{}').type).toMatch(/response_too_large$/);
    expect(runs.get(key)).toBe(1);
  });
});
