/**
 * Where the Fastify plugin sits in a request's lifecycle: its claim is the last preHandler of a route, so
 * a reply from any hook (the route's own `preHandler` option, an instance hook added after the plugin) is
 * never stored, nor one from a preHandler another plugin's `onRoute` hook added after the claim (the key
 * is released: the handler never ran); a reply stream that fails keeps a `response_not_captured` marker
 * (the handler answered: never run again); a reply the app writes itself after `reply.hijack()` leaves a
 * `response_not_captured` marker instead of a claim in progress forever.
 */
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { afterEach, expect, it } from 'vitest';
import { idempotencyPlugin } from '../../../src/fastify/index.js';
import { memoryStore } from '../../../src/index.js';

let app: FastifyInstance | undefined;
afterEach(async () => {
  await app?.close();
  app = undefined;
});

const runs = new Map<string, number>();
const ran = (request: FastifyRequest) =>
  runs.set(request.url, (runs.get(request.url) ?? 0) + 1).get(request.url);

async function start(): Promise<string> {
  runs.clear();
  app = fastify();
  await app.register(idempotencyPlugin, { store: memoryStore() });
  // A plugin registered after this one that adds a preHandler to each route in its own onRoute hook, as
  // @fastify/rate-limit does with `hook: 'preHandler'`: Fastify runs it after the plugin's claim.
  await app.register(
    fp(async (instance) => {
      instance.addHook('onRoute', (route) => {
        if (route.url !== '/rate-limited') return;
        const limit = async (request: FastifyRequest, reply: FastifyReply) => {
          if (request.headers['x-over-limit'] === 'yes') {
            return reply.code(429).send({ error: 'too many requests' });
          }
          if (request.headers['x-api-key'] === 'bad') {
            throw Object.assign(new Error('unauthenticated'), { statusCode: 401 });
          }
          // Sent before the hook returns, without `return reply`: a style Fastify's docs allow.
          if (request.headers['x-soft-limit'] === 'yes') {
            reply.code(429).send({ error: 'too many requests' });
          }
        };
        route.preHandler = [route.preHandler ?? [], limit].flat();
      });
    }),
  );
  // An authentication hook added after the plugin, for one path.
  app.addHook('preHandler', async (request, reply) => {
    if (request.url === '/late-auth' && request.headers['x-api-key'] !== 'good') {
      return reply.code(401).send({ error: 'unauthenticated' });
    }
  });
  const checkKey = async (request: FastifyRequest, reply: FastifyReply) => {
    if (request.headers['x-api-key'] !== 'good') return reply.code(401).send({ error: 'bad key' });
  };
  app.post('/route-auth', { preHandler: checkKey }, async (request, reply) => {
    ran(request);
    return reply.code(201).send({ charged: true });
  });
  app.post('/rate-limited', async (request, reply) => {
    ran(request);
    return reply.code(201).send({ charged: true });
  });
  app.post('/late-auth', async (request, reply) => {
    ran(request);
    return reply.code(201).send({ charged: true });
  });
  app.post('/export', async (request, reply) => {
    const run = ran(request);
    reply.type('text/csv');
    return reply.send(
      Readable.from(
        (async function* () {
          yield 'id,amount\n';
          if (run === 1) throw new Error('upstream broke');
          yield '1,4200\n';
        })(),
      ),
    );
  });
  app.post('/hijack', async (request, reply) => {
    ran(request);
    reply.hijack();
    reply.raw.writeHead(201, { 'content-type': 'text/plain' });
    reply.raw.end('written by hand');
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
}

const post = (url: string, headers: Record<string, string>) =>
  fetch(url, { method: 'POST', headers });

it('never stores a reply from a hook: the route’s own preHandler, or an instance hook added after the plugin', async () => {
  const base = await start();
  for (const path of ['/route-auth', '/late-auth']) {
    const key = randomUUID();
    const refused = await post(`${base}${path}`, { 'idempotency-key': key, 'x-api-key': 'bad' });
    expect(refused.status).toBe(401);
    // Before, the 401 was stored under the key and replayed to the caller with the right API key.
    const accepted = await post(`${base}${path}`, { 'idempotency-key': key, 'x-api-key': 'good' });
    expect(accepted.status).toBe(201);
    expect(accepted.headers.get('idempotent-replayed')).toBeNull();
    expect(runs.get(path)).toBe(1);
  }
});

it('never stores a reply from a preHandler another plugin’s onRoute hook added after the claim', async () => {
  const base = await start();
  const refusals: Array<Record<string, string>> = [
    { 'x-over-limit': 'yes' },
    { 'x-api-key': 'bad' },
  ];
  for (const refusal of refusals) {
    const key = randomUUID();
    const refused = await post(`${base}/rate-limited`, { 'idempotency-key': key, ...refusal });
    expect(refused.status).toBeGreaterThanOrEqual(400);
    // Before, the 429 (or the thrown 401, a 4xx) was stored as the handler's answer: every retry of the
    // key was replayed it, and the charge never ran.
    const accepted = await post(`${base}/rate-limited`, { 'idempotency-key': key });
    expect(accepted.status).toBe(201);
    expect(accepted.headers.get('idempotent-replayed')).toBeNull();
    const replay = await post(`${base}/rate-limited`, { 'idempotency-key': key });
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
  }
  expect(runs.get('/rate-limited')).toBe(2);
});

it('never runs the handler of a key released for a reply an async preHandler sent without returning it', async () => {
  const base = await start();
  const key = randomUUID();
  const refused = await post(`${base}/rate-limited`, {
    'idempotency-key': key,
    'x-soft-limit': 'yes',
  });
  expect(refused.status).toBe(429);
  // Before, Fastify went on to the handler while the capture released the key (reply.sent is false until
  // the response ended): it charged with the key free, the client got its 201 in place of the 429, and
  // the retry below charged a second time.
  const accepted = await post(`${base}/rate-limited`, { 'idempotency-key': key });
  expect(accepted.status).toBe(201);
  expect(accepted.headers.get('idempotent-replayed')).toBeNull();
  const replay = await post(`${base}/rate-limited`, { 'idempotency-key': key });
  expect(replay.headers.get('idempotent-replayed')).toBe('true');
  expect(runs.get('/rate-limited')).toBe(1);
});

it('keeps a response_not_captured marker for a reply stream that fails: settled, never run again', async () => {
  const base = await start();
  const key = randomUUID();
  await post(`${base}/export`, { 'idempotency-key': key })
    .then((response) => response.text())
    .catch(() => undefined);
  // Once, the key stayed in progress (its lease extended while the process lived): 409 in_progress
  // forever. Then it was released, and the retry charged a second time: the handler answered 200 with
  // its stream, so its work is done, and the key now keeps a marker.
  const retry = await post(`${base}/export`, { 'idempotency-key': key });
  expect(retry.status).toBe(409);
  expect(((await retry.json()) as { code: string }).code).toBe('response_not_captured');
  expect(runs.get('/export')).toBe(1);
});

it('keeps a response_not_captured marker for a reply written after reply.hijack(), and never runs it again', async () => {
  const base = await start();
  const key = randomUUID();
  const first = await post(`${base}/hijack`, { 'idempotency-key': key });
  expect(first.status).toBe(201);
  expect(await first.text()).toBe('written by hand');
  let retry = await post(`${base}/hijack`, { 'idempotency-key': key });
  // The marker is stored once the response has finished: a retry that raced it sees the claim.
  for (let i = 0; i < 50 && retry.status === 409; i++) {
    const problem = (await retry.json()) as { code: string };
    if (problem.code === 'response_not_captured') break;
    await new Promise((done) => setTimeout(done, 10));
    retry = await post(`${base}/hijack`, { 'idempotency-key': key });
  }
  expect(retry.status).toBe(409);
  expect(runs.get('/hijack')).toBe(1);
  const again = await post(`${base}/hijack`, { 'idempotency-key': key });
  expect(((await again.json()) as { code: string }).code).toBe('response_not_captured');
});
