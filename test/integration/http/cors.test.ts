/**
 * Browsers: with each framework's own CORS middleware mounted before the layer (cors for Express,
 * @fastify/cors, hono/cors), the layer's answers keep that middleware's headers, and name the headers the
 * layer adds (`Idempotent-Replayed`, `Retry-After`, `Link`) in its `Access-Control-Expose-Headers`, so a
 * script on another origin can read them. Requests without `Origin` and first executions are untouched.
 */
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import fastifyCors from '@fastify/cors';
import { serve } from '@hono/node-server';
import cors from 'cors';
import express from 'express';
import express4 from 'express4';
import fastify from 'fastify';
import { Hono } from 'hono';
import { cors as honoCors } from 'hono/cors';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idempotency as expressIdempotency } from '../../../src/express/index.js';
import { idempotencyPlugin } from '../../../src/fastify/index.js';
import { idempotency as honoIdempotency } from '../../../src/hono/index.js';
import { memoryStore } from '../../../src/index.js';
import { gate } from '../../helpers/http-harness.js';

const ORIGIN = 'https://app.example';
const CORS = { origin: ORIGIN, credentials: true, exposed: ['X-Request-Id'] } as const;

interface CorsServer {
  url: string;
  close(): Promise<void>;
}

// Requests whose body says `{ "hold": "<id>" }` wait for that gate: an in-flight duplicate gets 409.
const gates = new Map<string, ReturnType<typeof gate>>();
const held = async (body: unknown) => {
  const hold = (body as { hold?: string } | undefined)?.hold;
  if (hold !== undefined) await gates.get(hold)?.promise;
};

async function startExpress(framework: typeof express): Promise<CorsServer> {
  const app = framework();
  app.use(
    cors({ origin: CORS.origin, credentials: CORS.credentials, exposedHeaders: [...CORS.exposed] }),
  );
  app.use(framework.json());
  app.use(expressIdempotency({ store: memoryStore(), key: 'required' }));
  app.post('/orders', async (req, res) => {
    await held(req.body);
    res.status(201).set('X-Request-Id', randomUUID()).json({ id: randomUUID() });
  });
  const server = app.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/orders`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

async function startFastify(): Promise<CorsServer> {
  const app = fastify();
  await app.register(fastifyCors, {
    origin: CORS.origin,
    credentials: CORS.credentials,
    exposedHeaders: [...CORS.exposed],
  });
  await app.register(idempotencyPlugin, { store: memoryStore(), key: 'required' });
  app.post('/orders', async (request, reply) => {
    await held(request.body);
    reply.code(201).header('X-Request-Id', randomUUID());
    return { id: randomUUID() };
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  return {
    url: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/orders`,
    close: () => app.close(),
  };
}

async function startHono(): Promise<CorsServer> {
  const app = new Hono();
  app.use(
    '/orders',
    honoCors({
      origin: CORS.origin,
      credentials: CORS.credentials,
      exposeHeaders: [...CORS.exposed],
    }),
  );
  app.use('/orders', honoIdempotency({ store: memoryStore(), key: 'required' }));
  app.post('/orders', async (c) => {
    await held(await c.req.json());
    c.header('X-Request-Id', randomUUID());
    return c.json({ id: randomUUID() }, 201);
  });
  const server = await new Promise<ReturnType<typeof serve>>((resolve) => {
    const s = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, () => resolve(s));
  });
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/orders`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

/** The expose list as a set of lower-case names. */
function exposed(response: Response): Set<string> {
  const value = response.headers.get('access-control-expose-headers') ?? '';
  return new Set(
    value
      .split(',')
      .map((name) => name.trim().toLowerCase())
      .filter(Boolean),
  );
}

describe.each([
  ['express (cors)', () => startExpress(express)],
  ['express 4 (cors)', () => startExpress(express4)],
  ['fastify (@fastify/cors)', startFastify],
  ['hono (hono/cors)', startHono],
])('CORS on %s', (_name, start) => {
  let server: CorsServer;
  beforeAll(async () => {
    server = await start();
  });
  afterAll(async () => {
    await server?.close();
  });

  const post = (key: string, body: unknown, origin: string | null = ORIGIN) =>
    fetch(server.url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'idempotency-key': key,
        ...(origin === null ? {} : { origin }),
      },
      body: JSON.stringify(body),
    });

  it('a replay keeps the CORS headers and exposes Idempotent-Replayed; the first execution is untouched', async () => {
    // Arrange
    const key = randomUUID();
    // Act
    const first = await post(key, { amount: 1 });
    const replay = await post(key, { amount: 1 });
    // Assert
    expect(first.status).toBe(201);
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    expect(first.headers.get('access-control-allow-origin')).toBe(ORIGIN);
    expect(exposed(first)).toEqual(new Set(['x-request-id']));
    expect(replay.status).toBe(201);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.headers.get('access-control-allow-origin')).toBe(ORIGIN);
    expect(replay.headers.get('access-control-allow-credentials')).toBe('true');
    expect(exposed(replay)).toEqual(new Set(['x-request-id', 'idempotent-replayed']));
    expect(await replay.json()).toEqual(await first.json());
  });

  it("a 409 in progress exposes Retry-After and the problem's Link", async () => {
    // Arrange
    const key = randomUUID();
    const hold = randomUUID();
    const g = gate();
    gates.set(hold, g);
    const running = post(key, { hold });
    try {
      // Act: retry until the first request holds the key (its claim is under way)
      let duplicate = await post(key, { hold });
      for (let i = 0; i < 50 && duplicate.status !== 409; i++) {
        await new Promise((resolve) => setTimeout(resolve, 10));
        duplicate = await post(key, { hold });
      }
      // Assert
      expect(duplicate.status).toBe(409);
      expect(duplicate.headers.get('content-type')).toContain('application/problem+json');
      expect(duplicate.headers.get('retry-after')).toMatch(/^[1-9][0-9]*$/);
      expect(duplicate.headers.get('access-control-allow-origin')).toBe(ORIGIN);
      expect(exposed(duplicate)).toEqual(new Set(['x-request-id', 'retry-after', 'link']));
    } finally {
      g.open();
    }
    expect((await running).status).toBe(201);
  });

  it('a 422 mismatch exposes Link', async () => {
    // Arrange
    const key = randomUUID();
    await post(key, { amount: 1 });
    // Act
    const mismatch = await post(key, { amount: 2 });
    // Assert
    expect(mismatch.status).toBe(422);
    expect(exposed(mismatch)).toEqual(new Set(['x-request-id', 'link']));
  });

  it("a preflight for Idempotency-Key is the CORS middleware's, which allows the header by default", async () => {
    // Act
    const preflight = await fetch(server.url, {
      method: 'OPTIONS',
      headers: {
        origin: ORIGIN,
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'content-type,idempotency-key',
      },
    });
    // Assert
    expect(preflight.status).toBeLessThan(300);
    expect(preflight.headers.get('access-control-allow-origin')).toBe(ORIGIN);
    expect(preflight.headers.get('access-control-allow-headers')?.toLowerCase()).toContain(
      'idempotency-key',
    );
  });

  it('a request without Origin (not a browser) gets the expose list unchanged', async () => {
    // Arrange
    const key = randomUUID();
    await post(key, { amount: 1 }, null);
    // Act
    const replay = await post(key, { amount: 1 }, null);
    // Assert
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(exposed(replay)).not.toContain('idempotent-replayed');
  });
});
