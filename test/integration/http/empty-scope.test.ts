/**
 * A `scope` function that gives an empty scope (`''`, or only whitespace: `req.user?.tenantId ?? ''`, a
 * tenant header the request does not carry) means no scope, as `undefined` does: the caller's
 * credentials are digested. Keyed as it was, every such caller shared the scope `''`, and a second
 * caller's request under the first caller's key was replayed the first caller's response. Checked on every
 * adapter over the Redis store, and on each transactional route over a SQLite file.
 *
 * Beside it: a scope function giving an object (`req.user`) or a boolean is refused with a 500 before
 * anything is claimed; and `fingerprintHeaders: ['host']` tells one host's request from another's
 * (Fastify on HTTP/2 too, where the host is the `:authority` pseudo-header).
 */
import { randomUUID } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import {
  type ClientHttp2Session,
  connect as connectHttp2,
  createServer as createHttp2Server,
} from 'node:http2';
import type { AddressInfo } from 'node:net';
import { serve as serveNode } from '@hono/node-server';
import express, {
  type Request as ExpressRequest,
  type Response as ExpressResponse,
  type NextFunction,
} from 'express';
import fastify, { type FastifyRequest } from 'fastify';
import { Hono } from 'hono';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  idempotency as expressIdempotency,
  transactionalRoute as expressTransactional,
} from '../../../src/express/index.js';
import {
  transactionalRoute as fastifyTransactional,
  idempotencyPlugin,
} from '../../../src/fastify/index.js';
import { transactionalHandler, withIdempotency } from '../../../src/fetch/index.js';
import { idempotency as honoIdempotency } from '../../../src/hono/index.js';
import type { Store } from '../../../src/index.js';
import { redisStore } from '../../../src/redis/index.js';
import { sqliteTransactional } from '../../../src/sqlite/index.js';
import { env, requireService } from '../../helpers/env.js';
import { listenFetch } from '../../helpers/listen-fetch.js';
import { connectClient, deleteKeys, type TestRedisClient } from '../../helpers/redis-clients.js';
import { sqliteOrders } from './transactional-fixtures.js';

interface Server {
  /** `http://127.0.0.1:<port>`, without a path. */
  base: string;
  close(): Promise<void>;
}

/**
 * The scope the test's `x-scope` header asks for: `empty` → `''`, `async-empty` → a promise of `''`,
 * `blank` → whitespace, `object` → an object (as `req.user` would be), `boolean` → `true`; none → no scope.
 */
function scopeFor(mode: string | null | undefined): string | Promise<string> {
  const given: Record<string, unknown> = {
    empty: '',
    'async-empty': Promise.resolve(''),
    blank: ' \t ',
    object: { id: 'u1' },
    boolean: true,
  };
  return (mode ? given[mode] : undefined) as string | Promise<string>;
}

/** Every handler's answer: who called, on which host, and a fresh id per run. */
const answer = (authorization: string | null | undefined, host: string | null | undefined) => ({
  caller: authorization ?? null,
  host: host ?? null,
  id: randomUUID(),
});

/** Handler runs per Idempotency-Key. */
const runs = new Map<string, number>();
const ran = (key: string | null | undefined) => runs.set(key ?? '', (runs.get(key ?? '') ?? 0) + 1);

type Start = (store: Store, options: { fingerprintHeaders?: string[] }) => Promise<Server>;

const startExpress: Start = async (store, options) => {
  const app = express();
  app.use(express.json());
  app.use(expressIdempotency({ store, ...options, scope: (req) => scopeFor(req.get('x-scope')) }));
  app.post('/charges', (req, res) => {
    ran(req.get('idempotency-key'));
    res.status(201).json(answer(req.get('authorization'), req.get('host')));
  });
  app.use((error: Error, _req: ExpressRequest, res: ExpressResponse, _next: NextFunction) => {
    res.status(500).json({ error: error.message });
  });
  const server = app.listen(0, '127.0.0.1');
  await new Promise((done) => server.once('listening', done));
  return {
    base: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise((done) => server.close(() => done())),
  };
};

const startFastify: Start = async (store, options) => {
  const app = fastify();
  await app.register(idempotencyPlugin, {
    store,
    ...options,
    scope: (request) => scopeFor(request.headers['x-scope'] as string | undefined),
  });
  app.post('/charges', async (request, reply) => {
    ran(request.headers['idempotency-key'] as string);
    reply.code(201);
    return answer(request.headers.authorization, request.headers.host);
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  return {
    base: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`,
    close: () => app.close(),
  };
};

const startFetch: Start = async (store, options) => {
  const handler = withIdempotency(
    async (request: Request) => {
      ran(request.headers.get('idempotency-key'));
      return Response.json(
        answer(request.headers.get('authorization'), request.headers.get('host')),
        { status: 201 },
      );
    },
    { store, ...options, scope: (request) => scopeFor(request.headers.get('x-scope')) },
  );
  const { url, close } = await listenFetch(handler, '');
  return { base: url, close };
};

const startHono: Start = async (store, options) => {
  const app = new Hono();
  app.use(honoIdempotency({ store, ...options, scope: (c) => scopeFor(c.req.header('x-scope')) }));
  app.post('/charges', (c) => {
    ran(c.req.header('idempotency-key'));
    return c.json(answer(c.req.header('authorization'), c.req.header('host')), 201);
  });
  app.onError((error, c) => c.json({ error: error.message }, 500));
  const { url, close } = await listenFetch(app.fetch, '');
  return { base: url, close };
};

interface Sent {
  status: number;
  replayed: string | undefined;
  contentType: string | undefined;
  body: { caller?: string; host?: string; id?: string; code?: string };
}

/** POST `{"amount":4200}` to `/charges` with `headers` (`host` included: node:http sends it as given). */
function post(base: string, headers: Record<string, string>): Promise<Sent> {
  const payload = '{"amount":4200}';
  return new Promise((resolve, reject) => {
    const request = httpRequest(
      `${base}/charges`,
      {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'content-length': String(Buffer.byteLength(payload)),
          ...headers,
        },
      },
      (response) => {
        let text = '';
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => {
          text += chunk;
        });
        response.on('end', () =>
          resolve({
            status: response.statusCode ?? 0,
            replayed: response.headers['idempotent-replayed'] as string | undefined,
            contentType: response.headers['content-type'],
            // A framework's own 500 page may be text (Hono's `Internal Server Error`).
            body: text.startsWith('{') ? JSON.parse(text) : {},
          }),
        );
        response.on('error', reject);
      },
    );
    request.on('error', reject);
    request.end(payload);
  });
}

let connection: TestRedisClient | undefined;
const prefix = `idemtest:scope:${randomUUID().slice(0, 8)}:`;

beforeAll(async () => {
  await requireService('Redis', env.redisUrl);
  connection = await connectClient('node-redis', env.redisUrl);
});

afterAll(async () => {
  if (connection === undefined) return;
  await deleteKeys(connection.client, prefix);
  await connection.close();
});

const redis = (name: string) =>
  redisStore({
    client: connection!.client,
    prefix: `${prefix}${name}:`,
    checkEvictionPolicy: false,
  });

describe.each([
  ['express', startExpress],
  ['fastify', startFastify],
  ['fetch', startFetch],
  ['hono', startHono],
])('%s over Redis', (name, start) => {
  let server: Server;
  let byHost: Server;
  beforeAll(async () => {
    server = await start(redis(name), {});
    byHost = await start(redis(`${name}-host`), { fingerprintHeaders: ['host'] });
  });
  afterAll(async () => {
    await server?.close();
    await byHost?.close();
  });

  for (const mode of ['empty', 'async-empty', 'blank']) {
    it(`a scope function giving an empty scope (${mode}) scopes by the credentials`, async () => {
      const key = `k-${randomUUID()}`;
      const alice = await post(server.base, {
        'idempotency-key': key,
        authorization: 'Bearer alice',
        'x-scope': mode,
      });
      expect(alice.status).toBe(201);
      // Before, both were keyed under the scope '' (or '  '): Bob got Alice's charge back.
      const bob = await post(server.base, {
        'idempotency-key': key,
        authorization: 'Bearer bob',
        'x-scope': mode,
      });
      expect(bob.status).toBe(201);
      expect(bob.replayed).toBeUndefined();
      expect(bob.body.caller).toBe('Bearer bob');
      const aliceAgain = await post(server.base, {
        'idempotency-key': key,
        authorization: 'Bearer alice',
        'x-scope': mode,
      });
      expect(aliceAgain.replayed).toBe('true');
      expect(aliceAgain.body).toEqual(alice.body);
      // Keyed like no scope function at all: the credentials' digest, the same records.
      const aliceUnscoped = await post(server.base, {
        'idempotency-key': key,
        authorization: 'Bearer alice',
      });
      expect(aliceUnscoped.replayed).toBe('true');
      expect(runs.get(key)).toBe(2);
    });
  }

  for (const mode of ['object', 'boolean']) {
    it(`a scope function giving ${mode === 'object' ? 'an object' : 'a boolean'} is a 500, and nothing is claimed`, async () => {
      const key = `k-${randomUUID()}`;
      const refused = await post(server.base, {
        'idempotency-key': key,
        authorization: 'Bearer alice',
        'x-scope': mode,
      });
      expect(refused.status).toBe(500);
      expect(runs.get(key)).toBeUndefined();
      // Nothing was claimed: the same key with a usable scope runs at once (no 409, no 422).
      const retried = await post(server.base, {
        'idempotency-key': key,
        authorization: 'Bearer alice',
      });
      expect(retried.status).toBe(201);
      expect(retried.replayed).toBeUndefined();
      expect(runs.get(key)).toBe(1);
    });
  }

  it("fingerprintHeaders: ['host']: one token on two hosts is never replayed the other host's response", async () => {
    const key = `k-${randomUUID()}`;
    const onA = await post(byHost.base, {
      'idempotency-key': key,
      authorization: 'Bearer shared',
      host: 'a.example.com',
    });
    expect(onA.status).toBe(201);
    expect(onA.body.host).toBe('a.example.com');
    const onB = await post(byHost.base, {
      'idempotency-key': key,
      authorization: 'Bearer shared',
      host: 'b.example.com',
    });
    expect(onB.status).toBe(422);
    expect(onB.body.code).toBe('key_mismatch');
    const againOnA = await post(byHost.base, {
      'idempotency-key': key,
      authorization: 'Bearer shared',
      host: 'a.example.com',
    });
    expect(againOnA.replayed).toBe('true');
    expect(againOnA.body).toEqual(onA.body);
  });
});

/** An HTTP/2 server of `fetchHandler` through `@hono/node-server`, as the fetch and Hono adapters run on it. */
async function h2Fetch(fetchHandler: (request: Request) => Response | Promise<Response>) {
  const server = await new Promise<ReturnType<typeof serveNode>>((resolve) => {
    const s = serveNode(
      { fetch: fetchHandler, createServer: createHttp2Server, port: 0, hostname: '127.0.0.1' },
      () => resolve(s),
    );
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

type H2Start = (store: Store) => Promise<{ port: number; close(): Promise<void> }>;

const h2Fastify: H2Start = async (store) => {
  const app = fastify({ http2: true });
  await app.register(idempotencyPlugin, { store, fingerprintHeaders: ['host'] });
  app.post('/charges', async (request, reply) => {
    ran(request.headers['idempotency-key'] as string);
    reply.code(201);
    return answer(request.headers.authorization, request.hostname);
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  return { port: (app.server.address() as AddressInfo).port, close: () => app.close() };
};

const h2FetchAdapter: H2Start = (store) =>
  h2Fetch(
    withIdempotency(
      async (request: Request) => {
        ran(request.headers.get('idempotency-key'));
        const host = new URL(request.url).host;
        return Response.json(answer(request.headers.get('authorization'), host), { status: 201 });
      },
      { store, fingerprintHeaders: ['host'] },
    ),
  );

const h2Hono: H2Start = (store) => {
  const app = new Hono();
  app.use(honoIdempotency({ store, fingerprintHeaders: ['host'] }));
  app.post('/charges', (c) => {
    ran(c.req.header('idempotency-key'));
    return c.json(answer(c.req.header('authorization'), new URL(c.req.url).host), 201);
  });
  return h2Fetch(app.fetch);
};

describe.each([
  ['fastify', h2Fastify],
  ['fetch', h2FetchAdapter],
  ['hono', h2Hono],
])('%s on HTTP/2: the host is the :authority pseudo-header', (name, start) => {
  let session: ClientHttp2Session;
  let server: { port: number; close(): Promise<void> };
  beforeAll(async () => {
    server = await start(redis(`h2-${name}`));
    session = connectHttp2(`http://127.0.0.1:${server.port}`);
  });
  afterAll(async () => {
    session?.close();
    await server?.close();
  });

  const h2post = (key: string, authority: string) =>
    new Promise<{ status: number; body: Sent['body'] }>((resolve, reject) => {
      const stream = session.request({
        ':method': 'POST',
        ':path': '/charges',
        ':authority': authority,
        'idempotency-key': key,
        authorization: 'Bearer shared',
        'content-type': 'application/json',
      });
      let status = 0;
      let text = '';
      stream.on('response', (headers) => {
        status = headers[':status'] as number;
      });
      stream.setEncoding('utf8');
      stream.on('data', (chunk: string) => {
        text += chunk;
      });
      stream.on('close', () => resolve({ status, body: JSON.parse(text) }));
      stream.on('error', reject);
      stream.end('{"amount":4200}');
    });

  it("fingerprintHeaders: ['host'] tells one :authority from another", async () => {
    const key = `k-${randomUUID()}`;
    const onA = await h2post(key, 'a.example.com');
    expect(onA.status).toBe(201);
    expect(onA.body.host).toBe('a.example.com');
    // Before, `host` was read from the headers, where HTTP/2 has none: both hosts fingerprinted alike
    // and b was replayed a's response.
    const onB = await h2post(key, 'b.example.com');
    expect(onB.status).toBe(422);
    expect(onB.body.code).toBe('key_mismatch');
    const againOnA = await h2post(key, 'a.example.com');
    expect(againOnA.status).toBe(201);
    expect(againOnA.body).toEqual(onA.body);
  });
});

describe('transactional routes over SQLite: an empty scope scopes by the credentials', () => {
  const orders = sqliteOrders('tx-empty-scope');
  const local = sqliteTransactional({ database: orders.database });
  const headerOf = (value: string | string[] | undefined) =>
    typeof value === 'string' ? value : undefined;
  let expressServer: Server;
  let fastifyServer: Server;
  let fetchServer: Server;

  beforeAll(async () => {
    const app = express();
    app.use(express.json());
    app.post(
      '/charges',
      expressTransactional(
        local,
        (req: ExpressRequest) => {
          ran(req.get('idempotency-key'));
          return { status: 201, body: answer(req.get('authorization'), req.get('host')) };
        },
        { scope: (req) => scopeFor(req.get('x-scope')) },
      ),
    );
    app.use((error: Error, _req: ExpressRequest, res: ExpressResponse, _next: NextFunction) => {
      res.status(500).json({ error: error.message });
    });
    const server = app.listen(0, '127.0.0.1');
    await new Promise((done) => server.once('listening', done));
    expressServer = {
      base: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
      close: () => new Promise((done) => server.close(() => done())),
    };

    const f = fastify();
    const route = fastifyTransactional(
      local,
      (request: FastifyRequest) => {
        ran(headerOf(request.headers['idempotency-key']));
        return {
          status: 201,
          body: answer(headerOf(request.headers.authorization), request.headers.host),
        };
      },
      { scope: (request) => scopeFor(headerOf(request.headers['x-scope'])) },
    );
    f.post('/charges', { preParsing: route.keepJsonText }, route);
    await f.listen({ port: 0, host: '127.0.0.1' });
    fastifyServer = {
      base: `http://127.0.0.1:${(f.server.address() as AddressInfo).port}`,
      close: () => f.close(),
    };

    const handler = transactionalHandler(
      local,
      (request: Request) => {
        ran(request.headers.get('idempotency-key'));
        return {
          status: 201,
          body: answer(request.headers.get('authorization'), request.headers.get('host')),
        };
      },
      { scope: (request) => scopeFor(request.headers.get('x-scope')) },
    );
    const listening = await listenFetch(handler, '');
    fetchServer = { base: listening.url, close: listening.close };
  });

  afterAll(async () => {
    await expressServer?.close();
    await fastifyServer?.close();
    await fetchServer?.close();
    orders.dispose();
  });

  for (const route of ['express', 'fastify', 'fetch'] as const) {
    for (const mode of ['empty', 'async-empty', 'blank']) {
      it(`${route} (${mode}): another caller under the key runs as that caller`, async () => {
        const base = { express: expressServer, fastify: fastifyServer, fetch: fetchServer }[route]
          .base;
        const key = `k-${randomUUID()}`;
        const alice = await post(base, {
          'idempotency-key': key,
          authorization: 'Bearer alice',
          'x-scope': mode,
        });
        expect(alice.status).toBe(201);
        const bob = await post(base, {
          'idempotency-key': key,
          authorization: 'Bearer bob',
          'x-scope': mode,
        });
        expect(bob.status).toBe(201);
        expect(bob.replayed).toBeUndefined();
        expect(bob.body.caller).toBe('Bearer bob');
        const aliceAgain = await post(base, {
          'idempotency-key': key,
          authorization: 'Bearer alice',
          'x-scope': mode,
        });
        expect(aliceAgain.replayed).toBe('true');
        expect(aliceAgain.body).toEqual(alice.body);
        expect(runs.get(key)).toBe(2);
      });
    }
  }
});
