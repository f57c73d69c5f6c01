/**
 * The requests of the HTTP upgrade check and the routes that serve them, for any release of the package:
 * the routes are built from a release's adapter modules passed in, so the same code serves the release
 * that captured the fixtures (`capture-http-records.ts`, run on an older checkout) and the current one
 * (`http-records.test.ts`). A request retried across a rolling deploy reaches the other release: it must
 * get the stored answer, or at worst a 422 where the fingerprint changed on purpose, never a second run.
 *
 * Each case covers one way a body or a scope reaches the fingerprint: parsed before the layer (JSON,
 * kept raw JSON, urlencoded, text, raw bytes, multer, express-fileupload), read by the layer itself (no
 * parser, a parser after it), Fastify's and Hono's own parsing, query strings, credentials and cookies,
 * `fingerprintHeaders`, `scopeCookies`, PATCH and route parameters.
 * @module
 */
import { once } from 'node:events';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import multipart from '@fastify/multipart';
import { serve } from '@hono/node-server';
import express, { type RequestHandler } from 'express';
import fileUpload from 'express-fileupload';
import express4 from 'express4';
import Fastify from 'fastify';
import { Hono, type MiddlewareHandler } from 'hono';
import multer from 'multer';
import type * as ExpressAdapter from '../../../src/express/index.js';
import type * as FastifyAdapter from '../../../src/fastify/index.js';
import type * as FetchAdapter from '../../../src/fetch/index.js';
import type * as HonoAdapter from '../../../src/hono/index.js';
import type { Idempotency } from '../../../src/index.js';

/** The adapter modules of one release (imported statically, or from another checkout's `src`). */
export interface ReleaseAdapters {
  express: Pick<typeof ExpressAdapter, 'idempotency' | 'keepRawBody'>;
  fastify: Pick<typeof FastifyAdapter, 'idempotencyPlugin'>;
  hono: Pick<typeof HonoAdapter, 'idempotency'>;
  fetch: Pick<typeof FetchAdapter, 'withIdempotency'>;
}

/** The servers a case can be sent to. */
export type Target = 'express' | 'express4' | 'fastify' | 'hono' | 'fetch';

/** One request, sent the same way before and after the upgrade (multipart with a new boundary each time). */
export interface HttpCase {
  name: string;
  target: Target;
  path: string;
  method?: 'POST' | 'PATCH';
  headers?: Record<string, string>;
  body?: () => NonNullable<RequestInit['body']>;
  /**
   * Why this request fingerprints differently since the captured release (a fix: it was fingerprinted
   * without part of what the handler reads). Its retry across the upgrade must be a 422, never a run.
   */
  changed?: string;
}

const JSON_TYPE = { 'content-type': 'application/json' };
const FORM_TYPE = { 'content-type': 'application/x-www-form-urlencoded' };
const TEXT_TYPE = { 'content-type': 'text/plain' };

const nested = (depth: number) => `${'['.repeat(depth)}1${']'.repeat(depth)}`;

function upload(filename: string, content: string) {
  return () => {
    const form = new FormData();
    form.append('note', 'x');
    form.append('file', new Blob([content], { type: 'application/pdf' }), filename);
    return form;
  };
}

function fields() {
  const form = new FormData();
  form.append('note', 'x');
  form.append('b', 'y');
  return form;
}

function chunked(text: string) {
  return () =>
    new ReadableStream({
      start(controller) {
        controller.enqueue(new TextEncoder().encode(text));
        controller.close();
      },
    });
}

const DEEP_CHANGE =
  'JSON nested deeper than 256 levels: was the fingerprint of its JSON.stringify text, now the same canonical encoding as any body';

function commonCases(target: Exclude<Target, 'express4'>): HttpCase[] {
  const at = (path: string) => (target === 'fetch' ? '/any' : path);
  const json = at('/json');
  const cases: HttpCase[] = [
    {
      name: 'json',
      target,
      path: json,
      headers: JSON_TYPE,
      body: () => '{"b":[1,2.50,{"z":null,"a":"é"}],"a":1}',
    },
    {
      name: 'json int64',
      target,
      path: json,
      headers: JSON_TYPE,
      body: () => '{"id":9223372036854775807}',
    },
    {
      name: 'json query',
      target,
      path: `${json}?b=2&a=1&a=0`,
      headers: JSON_TYPE,
      body: () => '{"a":1}',
    },
    {
      name: 'json credentials',
      target,
      path: json,
      headers: { ...JSON_TYPE, authorization: 'Bearer t0k3n', cookie: 'sid=1; theme=dark' },
      body: () => '{"a":1}',
    },
    { name: 'json 100 deep', target, path: json, headers: JSON_TYPE, body: () => nested(100) },
    {
      name: 'json 300 deep',
      target,
      path: json,
      headers: JSON_TYPE,
      body: () => nested(300),
      changed: DEEP_CHANGE,
    },
    { name: 'json empty object', target, path: json, headers: JSON_TYPE, body: () => '{}' },
    { name: 'no body', target, path: json },
    { name: 'text', target, path: at('/text'), headers: TEXT_TYPE, body: () => 'hello world' },
    {
      name: 'multipart file',
      target,
      path: at(target === 'express' ? '/none' : '/multipart'),
      body: upload('a.pdf', 'hello'),
    },
    {
      name: 'multipart fields',
      target,
      path: at(target === 'express' ? '/none' : '/multipart'),
      body: fields,
    },
    {
      name: 'urlencoded',
      target,
      path: at(target === 'express' ? '/urlencoded' : '/form'),
      headers: FORM_TYPE,
      body: () => 'b=2&a=1',
    },
  ];
  if (target !== 'fastify') {
    cases.push({
      name: 'octets',
      target,
      path: at(target === 'express' ? '/raw' : '/text'),
      headers: { 'content-type': 'application/octet-stream' },
      body: () => new Uint8Array([0, 1, 2, 255]),
    });
  }
  return cases.map((c) => ({ ...c, name: `${target} ${c.name}` }));
}

/** Every case, by unique name. */
export const HTTP_CASES: readonly HttpCase[] = [
  ...commonCases('express'),
  ...commonCases('fastify'),
  ...commonCases('hono'),
  ...commonCases('fetch'),
  ...['/json-raw', '/none', '/none-then-json', '/text'].flatMap((path): HttpCase[] => [
    {
      name: `express ${path} int64`,
      target: 'express',
      path,
      headers: JSON_TYPE,
      body: () => '{"b":1,"a":9223372036854775807}',
    },
    { name: `express ${path} no body`, target: 'express', path },
  ]),
  {
    name: 'express /json-raw 300 deep',
    target: 'express',
    path: '/json-raw',
    headers: JSON_TYPE,
    body: () => nested(300),
    changed: DEEP_CHANGE,
  },
  {
    name: 'express /none text',
    target: 'express',
    path: '/none',
    headers: TEXT_TYPE,
    body: () => 'hi',
  },
  {
    name: 'express /raw json',
    target: 'express',
    path: '/raw',
    headers: JSON_TYPE,
    body: () => '{"b":1,"a":2}',
  },
  ...['/multer-before', '/multer-after', '/fileupload-before'].flatMap((path): HttpCase[] => [
    {
      name: `express ${path} file`,
      target: 'express',
      path,
      body: upload('a.pdf', 'hello'),
      ...(path === '/fileupload-before'
        ? {
            changed:
              "express-fileupload's files: were fingerprinted by type and size only, now also by field, name and bytes",
          }
        : {}),
    },
    { name: `express ${path} fields`, target: 'express', path, body: fields },
  ]),
  {
    name: 'express /multer-single file',
    target: 'express',
    path: '/multer-single',
    body: () => {
      const form = new FormData();
      form.append('file', new Blob(['abc'], { type: 'text/plain' }), 'a.txt');
      return form;
    },
  },
  {
    name: 'express /multer-before urlencoded',
    target: 'express',
    path: '/multer-before',
    headers: FORM_TYPE,
    body: () => 'a=1',
  },
  {
    name: 'express /fileupload-before json',
    target: 'express',
    path: '/fileupload-before',
    headers: JSON_TYPE,
    body: () => '{"a":1}',
  },
  {
    name: 'express /cookies',
    target: 'express',
    path: '/cookies',
    headers: { ...JSON_TYPE, cookie: 'sid=1; other=2' },
    body: () => '{"a":1}',
  },
  {
    name: 'express /fingerprint-header',
    target: 'express',
    path: '/fingerprint-header',
    headers: { ...JSON_TYPE, 'x-tenant': 't1' },
    body: () => '{"a":1}',
  },
  {
    name: 'express PATCH /json',
    target: 'express',
    path: '/json',
    method: 'PATCH',
    headers: JSON_TYPE,
    body: () => '{"a":1}',
  },
  {
    name: 'express /orders/42',
    target: 'express',
    path: '/orders/42',
    headers: JSON_TYPE,
    body: () => '{"a":1}',
  },
  {
    name: 'express /json chunked',
    target: 'express',
    path: '/json',
    headers: JSON_TYPE,
    body: chunked('{"a":1}'),
  },
  {
    name: 'express /none chunked',
    target: 'express',
    path: '/none',
    headers: JSON_TYPE,
    body: chunked('{"a":1}'),
  },
  {
    name: 'express4 /json',
    target: 'express4',
    path: '/json',
    headers: JSON_TYPE,
    body: () => '{"b":1,"a":2}',
  },
  {
    name: 'express4 /json text',
    target: 'express4',
    path: '/json',
    headers: TEXT_TYPE,
    body: () => 'plain',
  },
  { name: 'express4 /json no body', target: 'express4', path: '/json' },
  {
    name: 'express4 /none urlencoded',
    target: 'express4',
    path: '/none',
    headers: FORM_TYPE,
    body: () => 'b=2&a=1',
  },
  {
    name: 'hono /parsed-form',
    target: 'hono',
    path: '/parsed-form',
    body: upload('b.pdf', 'bytes'),
  },
  {
    name: 'hono /parsed-json',
    target: 'hono',
    path: '/parsed-json',
    headers: JSON_TYPE,
    body: () => '{"b":1,"a":2}',
  },
];

/** What a sent case got back. */
export interface CaseReply {
  status: number;
  replayed: string | null;
  body: string;
}

/** Send `c` with idempotency key `key` to the server of its target. */
export async function sendCase(
  urls: Record<Target, string>,
  c: HttpCase,
  key: string,
): Promise<CaseReply> {
  const response = await fetch(`${urls[c.target]}${c.path}`, {
    method: c.method ?? 'POST',
    headers: { 'idempotency-key': key, ...c.headers },
    body: c.body?.(),
    duplex: 'half',
  } as RequestInit);
  return {
    status: response.status,
    replayed: response.headers.get('idempotent-replayed'),
    body: await response.text(),
  };
}

/** The running servers of {@link serveRoutes}. */
export interface RunningRoutes {
  urls: Record<Target, string>;
  close(): Promise<void>;
}

async function listen(server: Server): Promise<string> {
  if (!server.listening) await once(server, 'listening');
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/**
 * Serve every route of the cases with `release`'s adapters on `engine`, each answering 201 with
 * `answer(path)` as JSON.
 */
export async function serveRoutes(
  release: ReleaseAdapters,
  engine: Idempotency,
  answer: (target: Target, path: string) => unknown,
): Promise<RunningRoutes> {
  const servers: Server[] = [];
  const urls = {} as Record<Target, string>;

  for (const [target, framework] of [
    ['express', express],
    ['express4', express4],
  ] as const) {
    const app = framework();
    const idem = release.express.idempotency({ engine, key: 'required' });
    const uploads = multer({ storage: multer.memoryStorage() }) as unknown as {
      any(): RequestHandler;
      single(field: string): RequestHandler;
    };
    const send: RequestHandler = (req, res) => {
      res.status(201).json(answer(target, req.path));
    };
    const json = express.json() as RequestHandler;
    app.post('/json', json, idem, send);
    app.patch('/json', json, idem, send);
    app.post(
      '/json-raw',
      express.json({ verify: release.express.keepRawBody }) as RequestHandler,
      idem,
      send,
    );
    app.post('/urlencoded', express.urlencoded({ extended: true }) as RequestHandler, idem, send);
    app.post('/text', express.text({ type: '*/*' }) as RequestHandler, idem, send);
    app.post('/raw', express.raw({ type: '*/*' }) as RequestHandler, idem, send);
    app.post('/none', idem, send);
    app.post('/none-then-json', idem, json, send);
    app.post('/multer-before', uploads.any(), idem, send);
    app.post('/multer-single', uploads.single('file'), idem, send);
    app.post('/multer-after', idem, uploads.any(), send);
    app.post('/fileupload-before', fileUpload() as unknown as RequestHandler, idem, send);
    app.post('/cookies', json, idem.route({ scopeCookies: ['sid'] }), send);
    app.post('/fingerprint-header', json, idem.route({ fingerprintHeaders: ['x-tenant'] }), send);
    app.post('/orders/:id', json, idem, send);
    const server = app.listen(0, '127.0.0.1');
    servers.push(server);
    urls[target] = await listen(server);
  }

  const fastify = Fastify();
  await fastify.register(multipart);
  await fastify.register(release.fastify.idempotencyPlugin, { engine, key: 'required' });
  fastify.addContentTypeParser(
    'application/x-www-form-urlencoded',
    { parseAs: 'string' },
    (_request, body, done) => done(null, Object.fromEntries(new URLSearchParams(String(body)))),
  );
  for (const path of ['/json', '/text', '/multipart', '/form']) {
    fastify.post(path, async (_request, reply) => reply.code(201).send(answer('fastify', path)));
  }
  await fastify.listen({ port: 0, host: '127.0.0.1' });
  urls.fastify = `http://127.0.0.1:${(fastify.server.address() as AddressInfo).port}`;

  const hono = new Hono();
  const honoIdem = release.hono.idempotency({ engine, key: 'required' });
  for (const path of ['/json', '/text', '/multipart', '/form']) {
    hono.post(path, honoIdem, (c) => c.json(answer('hono', path), 201));
  }
  const parseForm: MiddlewareHandler = async (c, next) => {
    await c.req.parseBody();
    await next();
  };
  const parseJson: MiddlewareHandler = async (c, next) => {
    await c.req.json();
    await next();
  };
  hono.post('/parsed-form', parseForm, honoIdem, (c) =>
    c.json(answer('hono', '/parsed-form'), 201),
  );
  hono.post('/parsed-json', parseJson, honoIdem, (c) =>
    c.json(answer('hono', '/parsed-json'), 201),
  );
  const honoServer = serve({ fetch: hono.fetch, port: 0, hostname: '127.0.0.1' }) as Server;
  servers.push(honoServer);
  urls.hono = await listen(honoServer);

  const handler = release.fetch.withIdempotency(
    async (request) =>
      Response.json(answer('fetch', new URL(request.url).pathname), { status: 201 }),
    { engine, key: 'required' },
  );
  const fetchServer = serve({ fetch: handler, port: 0, hostname: '127.0.0.1' }) as Server;
  servers.push(fetchServer);
  urls.fetch = await listen(fetchServer);

  return {
    urls,
    async close() {
      await fastify.close();
      for (const server of servers) {
        server.closeAllConnections();
        await new Promise((done) => server.close(done));
      }
    },
  };
}
