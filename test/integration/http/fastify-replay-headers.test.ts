/**
 * The Fastify plugin's replay carries each stored header once, with all its values, in place of a value a
 * hook set on the reply before the layer: the first response had the handler's value there (Fastify's
 * `reply.header` replaces), so the replay must too. Repeated stored names (two Link lines) stay repeated.
 */
import { randomUUID } from 'node:crypto';
import { request as httpRequest } from 'node:http';
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

interface Raw {
  status: number;
  /** Header lines as sent, names lower-cased: repeated names stay repeated. */
  lines: Array<[string, string]>;
  body: string;
}

function post(url: string, headers: Record<string, string>): Promise<Raw> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method: 'POST', headers, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        body += chunk;
      });
      res.on('end', () => {
        const lines: Array<[string, string]> = [];
        for (let i = 0; i + 1 < res.rawHeaders.length; i += 2) {
          lines.push([res.rawHeaders[i]!.toLowerCase(), res.rawHeaders[i + 1]!]);
        }
        resolve({ status: res.statusCode ?? 0, lines, body });
      });
    });
    req.on('error', reject);
    req.end();
  });
}

const valuesOf = (raw: Raw, name: string) =>
  raw.lines.filter(([n]) => n === name).map(([, v]) => v);

async function start(): Promise<string> {
  app = fastify();
  // Set on every reply before the layer decides, as an API's "never cache" default.
  app.addHook('onRequest', async (_request, reply) => {
    reply.header('cache-control', 'no-store');
  });
  await app.register(idempotencyPlugin, { store: memoryStore(), replayHeaders: ['link'] });
  app.post('/default', async (_request, reply) => reply.code(201).send({ id: 1 }));
  app.post('/cacheable', async (_request, reply) => {
    reply.header('cache-control', 'private, max-age=60');
    return reply.code(201).send({ id: 2 });
  });
  app.post('/linked', async (_request, reply) => {
    reply.header('link', ['</orders/3>; rel="self"', '</customers/9>; rel="customer"']);
    return reply.code(201).send({ id: 3 });
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
}

it('replays a header a hook set before the layer once, as the first response had it', async () => {
  const base = await start();
  for (const [path, expected] of [
    ['/default', 'no-store'],
    ['/cacheable', 'private, max-age=60'],
  ] as const) {
    const key = randomUUID();
    const first = await post(`${base}${path}`, { 'idempotency-key': key });
    expect(valuesOf(first, 'cache-control'), path).toEqual([expected]);
    const replay = await post(`${base}${path}`, { 'idempotency-key': key });
    expect(valuesOf(replay, 'idempotent-replayed'), path).toEqual(['true']);
    // Before, the stored value went out beside the hook's: `no-store` twice, or `no-store` and
    // `private, max-age=60` (which a cache reads as both).
    expect(valuesOf(replay, 'cache-control'), path).toEqual([expected]);
    expect(replay.body, path).toBe(first.body);
  }
});

it('replays a header the handler set with several values as the first response sent them', async () => {
  const base = await start();
  const key = randomUUID();
  const first = await post(`${base}/linked`, { 'idempotency-key': key });
  const replay = await post(`${base}/linked`, { 'idempotency-key': key });
  expect(valuesOf(replay, 'idempotent-replayed')).toEqual(['true']);
  expect(valuesOf(replay, 'link')).toEqual(valuesOf(first, 'link'));
  expect(valuesOf(replay, 'link')).toEqual([
    '</orders/3>; rel="self"',
    '</customers/9>; rel="customer"',
  ]);
});
