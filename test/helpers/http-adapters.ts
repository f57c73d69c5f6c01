/**
 * The adapter harnesses of the HTTP conformance suite (Express 5 and 4, Fastify, fetch, Hono): each mounts the neutral test routes in its
 * framework's native way (Express `res.json`/`res.send`/`res.end`/piped streams, Fastify `reply.send` with
 * objects/buffers/streams, fetch and Hono `Response`s) and serves them on a loopback port.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { serve } from '@hono/node-server';
import express from 'express';
import express4 from 'express4';
import Fastify from 'fastify';
import { Hono } from 'hono';
import {
  currentIdempotency as expressContext,
  idempotency as expressIdempotency,
} from '../../src/express/index.js';
import {
  currentIdempotency as fastifyContext,
  idempotencyPlugin,
} from '../../src/fastify/index.js';
import {
  currentIdempotency as fetchContext,
  idempotencyOf,
  withIdempotency,
} from '../../src/fetch/index.js';
import {
  currentIdempotency as honoContext,
  idempotency as honoIdempotency,
} from '../../src/hono/index.js';
import type { IdempotencyContext } from '../../src/http/index.js';
import type { Idempotency } from '../../src/index.js';
import {
  type HttpAdapterHarness,
  parseTestBody,
  type RunningServer,
  type TestBody,
  type TestReply,
  type TestRoute,
} from './http-harness.js';

// The context on the framework's request object, checked against currentIdempotency() when the test runs
// with asyncContext on: a disagreement hands the handler `undefined`, which the suite notices.
let asyncContextOn = false;
function agree(
  own: IdempotencyContext | undefined,
  current: () => IdempotencyContext | undefined,
): IdempotencyContext | undefined {
  if (!asyncContextOn) return own;
  return current() === own ? own : undefined;
}

async function* slowChunks(chunks: Uint8Array[], delayMs: number) {
  for (const chunk of chunks) {
    if (delayMs > 0) await sleep(delayMs);
    yield Buffer.from(chunk);
  }
}

/**
 * A web stream that reads `source` one chunk per read asked for (no read-ahead), as a handler's own
 * `ReadableStream` over a generator does; its cancel ends the generator.
 */
function webStreamOf(source: AsyncIterable<Uint8Array>): ReadableStream<Uint8Array> {
  const iterator = source[Symbol.asyncIterator]();
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        const next = await iterator.next();
        if (next.done) controller.close();
        else controller.enqueue(next.value);
      },
      async cancel() {
        await iterator.return?.();
      },
    },
    { highWaterMark: 0 },
  );
}

/** Resolves when `res` (a Node response) has closed. */
function closeOf(res: NodeJS.EventEmitter & { closed?: boolean }): Promise<void> {
  return new Promise((resolve) => {
    if (res.closed === true) resolve();
    else res.once('close', () => resolve());
  });
}

/** Resolves when `signal` aborts. */
function abortOf(signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) resolve();
    else signal.addEventListener('abort', () => resolve(), { once: true });
  });
}

function bodyBytes(body: TestBody): Buffer | undefined {
  if (body.kind === 'json') return Buffer.from(JSON.stringify(body.value));
  if (body.kind === 'bytes') return Buffer.from(body.value);
  return undefined;
}

/** A fetch `Response` for a test reply (used by the fetch and Hono harnesses). */
function toResponse(reply: TestReply): Response {
  const headers = new Headers();
  for (const [name, value] of Object.entries(reply.headers ?? {})) {
    for (const v of [value].flat()) headers.append(name, v);
  }
  const { body } = reply;
  if (body.kind === 'json') headers.set('content-type', 'application/json');
  if (body.kind === 'bytes' || body.kind === 'stream')
    headers.set('content-type', body.contentType);
  if (body.kind === 'stream') {
    const stream = Readable.toWeb(Readable.from(slowChunks(body.chunks, body.delayMs ?? 0)));
    return new Response(stream as ReadableStream, { status: reply.status, headers });
  }
  if (body.kind === 'live') {
    headers.set('content-type', body.contentType);
    return new Response(webStreamOf(body.produce()), { status: reply.status, headers });
  }
  return new Response(bodyBytes(body) ?? null, { status: reply.status, headers });
}

function listen(server: Server): Promise<RunningServer> {
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      resolve({
        url: `http://127.0.0.1:${port}`,
        close: () =>
          new Promise<void>((done) => {
            server.closeAllConnections();
            server.close(() => done());
          }),
      });
    });
  });
}

/**
 * Express (`framework`: 5, or 4 through the `express4` alias), with `express.json()` and `express.raw()`
 * before the middleware.
 */
function expressHarnessOf(name: string, framework: typeof express): HttpAdapterHarness {
  return {
    name,
    start: (options) => startExpress(framework, options),
  };
}

async function startExpress(
  framework: typeof express,
  { engine, defaults, routes }: Parameters<HttpAdapterHarness['start']>[0],
): Promise<Awaited<ReturnType<HttpAdapterHarness['start']>>> {
  asyncContextOn ||= defaults.asyncContext === true;
  const app = framework();
  app.use(framework.json(), framework.raw({ type: 'application/octet-stream' }));
  const idem = expressIdempotency({ engine, ...defaults });
  for (const route of routes) {
    const method = route.method.toLowerCase() as 'post';
    // Express 4 does not catch a rejected handler (5 does): pass the error on, as Express 4 apps must.
    const handler = async (req: express.Request, res: express.Response) => {
      const reply = await route.handle({
        body: Buffer.isBuffer(req.body) && req.body.length === 0 ? undefined : req.body,
        header: (name) => req.get(name),
        context: agree(req.idempotency, expressContext),
        gone: () => closeOf(res),
      });
      res.status(reply.status);
      for (const [name, value] of Object.entries(reply.headers ?? {})) res.setHeader(name, value);
      const { body } = reply;
      if (body.kind === 'json') res.json(body.value);
      else if (body.kind === 'bytes') res.type(body.contentType).send(Buffer.from(body.value));
      else if (body.kind === 'empty') res.end();
      else if (body.kind === 'live') {
        res.type(body.contentType);
        // Written as an app writes an event stream: each chunk as it comes, on, whether or not the client
        // is still there (a write after it left is dropped), then the end.
        try {
          for await (const chunk of body.produce()) res.write(chunk);
          res.end();
        } catch (error) {
          res.destroy(error as Error);
        }
      } else {
        res.type(body.contentType);
        Readable.from(slowChunks(body.chunks, body.delayMs ?? 0)).pipe(res);
      }
    };
    app[method](route.path, idem.route(route.options ?? {}), (req, res, next) => {
      handler(req, res).catch(next);
    });
  }
  // A custom error handler, as real apps have: its 500 must release the key like the default one.
  app.use(
    (error: Error, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
      res.status(500).json({ error: error.message });
    },
  );
  return listen(createServer(app));
}

/** Express 5. */
export const expressHarness = expressHarnessOf('express', express);

/** Express 4: the same routes and middleware on the other supported major. */
export const express4Harness = expressHarnessOf('express4', express4);

/** Fastify 5 with the plugin; route options go in `config.idempotency`. */
export const fastifyHarness: HttpAdapterHarness = {
  name: 'fastify',
  async start({ engine, defaults, routes }) {
    asyncContextOn ||= defaults.asyncContext === true;
    // Close every connection on close(), as the other harnesses do. Fastify's default closes only idle
    // ones, then waits (up to Node's 60 s headersTimeout) for a connection on which no request has arrived:
    // fetch left one such connection open once the suite had the scopeCookies case, and afterAll timed out.
    const app = Fastify({ forceCloseConnections: true });
    app.addContentTypeParser(
      'application/octet-stream',
      { parseAs: 'buffer' },
      (_req, body, done) => done(null, body),
    );
    await app.register(idempotencyPlugin, { engine, ...defaults });
    for (const route of routes) {
      app.route({
        method: route.method,
        url: route.path,
        config: { idempotency: route.options ?? {} },
        handler: async (req, reply) => {
          const result = await route.handle({
            body: req.body,
            header: (name) => req.headers[name] as string | undefined,
            context: agree(req.idempotency, fastifyContext),
            gone: () => closeOf(reply.raw),
          });
          reply.code(result.status);
          for (const [name, value] of Object.entries(result.headers ?? {}))
            reply.header(name, value);
          const { body } = result;
          if (body.kind === 'json') return reply.send(body.value);
          if (body.kind === 'bytes')
            return reply.type(body.contentType).send(Buffer.from(body.value));
          if (body.kind === 'empty') return reply.send();
          if (body.kind === 'live') {
            return reply.type(body.contentType).send(Readable.from(body.produce()));
          }
          return reply
            .type(body.contentType)
            .send(Readable.from(slowChunks(body.chunks, body.delayMs ?? 0)));
        },
      });
    }
    await app.listen({ port: 0, host: '127.0.0.1' });
    const { port } = app.server.address() as AddressInfo;
    return { url: `http://127.0.0.1:${port}`, close: () => app.close() };
  },
};

function serveFetch(
  fetch: (request: Request) => Promise<Response> | Response,
): Promise<RunningServer> {
  return new Promise((resolve) => {
    const server = serve({ fetch, port: 0, hostname: '127.0.0.1' }, (info) => {
      resolve({
        url: `http://127.0.0.1:${info.port}`,
        close: () =>
          new Promise<void>((done) => {
            (server as Server).closeAllConnections?.();
            server.close(() => done());
          }),
      });
    });
  });
}

/** Plain fetch handlers, one `withIdempotency()` per route, served by @hono/node-server. */
export const fetchHarness: HttpAdapterHarness = {
  name: 'fetch',
  async start({ engine, defaults, routes }) {
    asyncContextOn ||= defaults.asyncContext === true;
    const table = new Map(
      routes.map((route) => [
        `${route.method} ${route.path}`,
        withIdempotency(
          async (request: Request) => {
            const bytes = new Uint8Array(await request.arrayBuffer());
            const reply = await route.handle({
              body: parseTestBody(request.headers.get('content-type') ?? undefined, bytes),
              header: (name) => request.headers.get(name) ?? undefined,
              context: agree(idempotencyOf(request), fetchContext),
              gone: () => abortOf(request.signal),
            });
            return toResponse(reply);
          },
          { engine, ...defaults, ...route.options },
        ),
      ]),
    );
    return serveFetch((request) => {
      const handler = table.get(`${request.method} ${new URL(request.url).pathname}`);
      return handler === undefined ? new Response('not found', { status: 404 }) : handler(request);
    });
  },
};

/** Hono 4 with the middleware per route; the handler reads `c.get('idempotency')`. */
export const honoHarness: HttpAdapterHarness = {
  name: 'hono',
  async start({ engine, defaults, routes }) {
    asyncContextOn ||= defaults.asyncContext === true;
    const app = new Hono();
    const idem = honoIdempotency({ engine, ...defaults });
    for (const route of routes) {
      app.on(route.method, route.path, idem.route(route.options ?? {}), async (c) => {
        const bytes = new Uint8Array(await c.req.arrayBuffer());
        const reply = await route.handle({
          body: parseTestBody(c.req.header('content-type'), bytes),
          header: (name) => c.req.header(name),
          context: agree(c.get('idempotency'), honoContext),
          gone: () => abortOf(c.req.raw.signal),
        });
        return toResponse(reply);
      });
    }
    return serveFetch(app.fetch);
  },
};

/** Every harness. */
export const allHarnesses = [
  expressHarness,
  express4Harness,
  fastifyHarness,
  fetchHarness,
  honoHarness,
];

/**
 * Start every adapter on one engine with the same routes and no route defaults, for tests that check a
 * behaviour on all four; close each `server` afterwards.
 */
export async function startAllAdapters(
  engine: Idempotency,
  routes: TestRoute[],
): Promise<Array<{ name: string; server: RunningServer }>> {
  const servers: Array<{ name: string; server: RunningServer }> = [];
  for (const harness of allHarnesses) {
    servers.push({
      name: harness.name,
      server: await harness.start({ engine, defaults: {}, routes }),
    });
  }
  return servers;
}
