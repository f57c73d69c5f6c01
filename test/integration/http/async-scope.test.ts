/**
 * A `scope` function whose promise resolves to no scope (`undefined`, `null`: a lookup that found no
 * tenant) means what a synchronous one returning nothing means: the caller's credentials are digested. It
 * must never put every such caller in one shared scope, where a second user's request under the first
 * user's key would be replayed the first user's response.
 */
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import express from 'express';
import fastify from 'fastify';
import { Hono } from 'hono';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idempotency as expressIdempotency } from '../../../src/express/index.js';
import { idempotencyPlugin } from '../../../src/fastify/index.js';
import { withIdempotency } from '../../../src/fetch/index.js';
import { idempotency as honoIdempotency } from '../../../src/hono/index.js';
import { memoryStore } from '../../../src/index.js';
import { listenFetch } from '../../helpers/listen-fetch.js';

interface Server {
  url: string;
  close(): Promise<void>;
}

// No tenant found: the promise resolves to nothing (`null` when the header asks for it).
const noScope = async (header: string | null | undefined): Promise<string> =>
  (header === 'null' ? null : undefined) as unknown as string;

const answer = (authorization: string | null | undefined) => ({
  caller: authorization ?? null,
  id: randomUUID(),
});

async function startExpress(): Promise<Server> {
  const app = express();
  app.use(express.json());
  app.use(expressIdempotency({ store: memoryStore(), scope: (req) => noScope(req.get('x-none')) }));
  app.post('/charges', (req, res) => {
    res.status(201).json(answer(req.get('authorization')));
  });
  const server = app.listen(0, '127.0.0.1');
  await new Promise((done) => server.once('listening', done));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/charges`,
    close: () => new Promise((done) => server.close(() => done())),
  };
}

async function startFastify(): Promise<Server> {
  const app = fastify();
  await app.register(idempotencyPlugin, {
    store: memoryStore(),
    scope: (request) => noScope(request.headers['x-none'] as string | undefined),
  });
  app.post('/charges', async (request, reply) => {
    reply.code(201);
    return answer(request.headers.authorization);
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  return {
    url: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/charges`,
    close: () => app.close(),
  };
}

function startFetch(): Promise<Server> {
  const handler = withIdempotency(
    async (request: Request) =>
      Response.json(answer(request.headers.get('authorization')), { status: 201 }),
    { store: memoryStore(), scope: (request) => noScope(request.headers.get('x-none')) },
  );
  return listenFetch(handler, '/charges');
}

function startHono(): Promise<Server> {
  const app = new Hono();
  app.use(honoIdempotency({ store: memoryStore(), scope: (c) => noScope(c.req.header('x-none')) }));
  app.post('/charges', (c) => c.json(answer(c.req.header('authorization')), 201));
  return listenFetch(app.fetch, '/charges');
}

describe.each([
  ['express', startExpress],
  ['fastify', startFastify],
  ['fetch', startFetch],
  ['hono', startHono],
])('%s: a scope function resolving to no scope', (_name, start) => {
  let server: Server;
  beforeAll(async () => {
    server = await start();
  });
  afterAll(async () => {
    await server?.close();
  });

  const charge = async (key: string, authorization: string, none: 'undefined' | 'null') => {
    const response = await fetch(server.url, {
      method: 'POST',
      headers: {
        'idempotency-key': key,
        authorization,
        'x-none': none,
        'content-type': 'application/json',
      },
      body: '{"amount":4200}',
    });
    return {
      status: response.status,
      replayed: response.headers.get('idempotent-replayed'),
      body: (await response.json()) as { caller: string; id: string },
    };
  };

  for (const none of ['undefined', 'null'] as const) {
    it(`(${none}) scopes by the credentials: another user's request under the key runs as that user`, async () => {
      const key = `k-${randomUUID()}`;
      const alice = await charge(key, 'Bearer alice', none);
      expect(alice.status).toBe(201);
      // Before, both landed in the shared scope '' and Bob got Alice's charge back.
      const bob = await charge(key, 'Bearer bob', none);
      expect(bob.status).toBe(201);
      expect(bob.replayed).toBeNull();
      expect(bob.body.caller).toBe('Bearer bob');
      const aliceAgain = await charge(key, 'Bearer alice', none);
      expect(aliceAgain.replayed).toBe('true');
      expect(aliceAgain.body).toEqual(alice.body);
    });
  }
});
