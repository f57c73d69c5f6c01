/**
 * A relayed stream (Fastify, fetch, Hono) that something after the layer throws away unread: a later
 * Fastify `onSend` hook returning another payload for it, an outer Hono middleware that sets another
 * `Response`. The server never reads the relay to its end, so the outcome would never be stored and the key
 * would stay in progress (409 to every retry, its lease extended) until `maxExecution`, unbounded here. The
 * layer abandons such a relay, as for a client that left: it reads the handler's stream itself and stores
 * it, and the retry gets the handler's body as its replay (not what the first client got).
 * - Fastify: once the response has finished (deterministic).
 * - fetch and Hono: once the thrown-away stream is garbage-collected (best effort; forced here).
 */
import { randomUUID } from 'node:crypto';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import v8 from 'node:v8';
import vm from 'node:vm';
import { serve } from '@hono/node-server';
import fastify, { type FastifyInstance } from 'fastify';
import { Hono } from 'hono';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idempotencyPlugin } from '../../../src/fastify/index.js';
import { withIdempotency } from '../../../src/fetch/index.js';
import { idempotency as honoIdempotency } from '../../../src/hono/index.js';
import { createIdempotency, memoryStore } from '../../../src/index.js';

v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc') as () => void;

// No maxExecution: a key left in progress would stay so for as long as the process lives.
const engine = createIdempotency({
  store: memoryStore(),
  namespace: `relay-unread-${randomUUID()}`,
});

const runs: string[] = [];
const EVENTS = ['data: 1\n\n', 'data: 2\n\n', 'data: 3\n\n'];
const HANDLER_BODY = EVENTS.join('');

// Three events, 10 ms apart, then the end: a stream still being written when the layer relays it.
function nodeEvents(): Readable {
  const stream = new Readable({ read() {} });
  let n = 0;
  const timer = setInterval(() => {
    if (n < EVENTS.length) stream.push(EVENTS[n++]);
    else {
      clearInterval(timer);
      stream.push(null);
    }
  }, 10);
  return stream;
}

function webEvents(): ReadableStream<Uint8Array> {
  let n = 0;
  let timer: NodeJS.Timeout | undefined;
  return new ReadableStream<Uint8Array>({
    start(controller) {
      timer = setInterval(() => {
        if (n < EVENTS.length) controller.enqueue(Buffer.from(EVENTS[n++]!));
        else {
          clearInterval(timer);
          controller.close();
        }
      }, 10);
    },
    cancel() {
      clearInterval(timer);
    },
  });
}

// The handler's event stream, not its replay (sent whole, which the wrappers leave alone).
const isFreshStream = (response: Response) =>
  response.headers.get('content-type') === 'text/event-stream' &&
  !response.headers.has('idempotent-replayed');

let fastifyApp: FastifyInstance;
let fetchServer: Server;
let honoServer: Server;
const bases: Record<string, string> = {};

const listen = (handler: (request: Request) => Response | Promise<Response>) =>
  new Promise<Server>((resolve) => {
    const s = serve({ fetch: handler, port: 0, hostname: '127.0.0.1' }, () => resolve(s as Server));
  });
const urlOf = (server: Server) =>
  `http://127.0.0.1:${(server.address() as AddressInfo).port}/events`;

beforeAll(async () => {
  fastifyApp = fastify();
  await fastifyApp.register(idempotencyPlugin, { engine });
  fastifyApp.post('/events', async (request, reply) => {
    runs.push(`fastify ${request.headers['idempotency-key']}`);
    return reply.type('text/event-stream').send(nodeEvents());
  });
  // A web stream given to `reply.send`, relayed through the same Node stream.
  fastifyApp.post('/web-events', async (request, reply) => {
    runs.push(`fastify web stream ${request.headers['idempotency-key']}`);
    return reply.type('text/event-stream').send(webEvents());
  });
  // Added after the plugin: runs after its capture, and sends a string in place of the relayed stream.
  fastifyApp.addHook('onSend', async (_request, _reply, payload) =>
    payload instanceof Readable ? 'replaced' : payload,
  );
  await fastifyApp.listen({ port: 0, host: '127.0.0.1' });
  bases.fastify = `http://127.0.0.1:${(fastifyApp.server.address() as AddressInfo).port}/events`;
  bases['fastify web stream'] = bases.fastify.replace(/events$/, 'web-events');

  // An outer wrapper that answers another Response, the handler's left unread.
  const inner = withIdempotency(
    async (request: Request) => {
      runs.push(`fetch ${request.headers.get('idempotency-key')}`);
      return new Response(webEvents(), { headers: { 'content-type': 'text/event-stream' } });
    },
    { engine },
  );
  fetchServer = await listen(async (request) => {
    const response = await inner(request);
    if (!isFreshStream(response)) return response;
    return new Response('replaced');
  });
  bases.fetch = urlOf(fetchServer);

  const hono = new Hono();
  // Outer middleware (declared first) that sets another Response for the streamed route.
  hono.use('/events', async (c, next) => {
    await next();
    if (isFreshStream(c.res)) c.res = new Response('replaced');
  });
  hono.post('/events', honoIdempotency({ engine }), (c) => {
    runs.push(`hono ${c.req.header('idempotency-key')}`);
    return c.body(webEvents(), 200, { 'content-type': 'text/event-stream' });
  });
  honoServer = await listen(hono.fetch);
  bases.hono = urlOf(honoServer);
});

afterAll(async () => {
  await fastifyApp?.close();
  for (const server of [fetchServer, honoServer]) {
    if (server === undefined) continue;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
});

async function post(url: string, key: string) {
  const response = await fetch(url, { method: 'POST', headers: { 'idempotency-key': key } });
  const text = await response.text();
  const code = response.headers.get('content-type')?.startsWith('application/problem+json')
    ? (JSON.parse(text) as { code: string }).code
    : undefined;
  return {
    status: response.status,
    code,
    text,
    replayed: response.headers.get('idempotent-replayed'),
  };
}

describe.each(['fastify', 'fastify web stream', 'fetch', 'hono'])('%s', (name) => {
  it('stores the outcome of a relayed stream thrown away unread: the retry gets the handler body as a replay, not 409 in_progress for ever', async () => {
    const key = randomUUID();
    const url = bases[name]!;
    const first = await post(url, key);
    expect(first).toMatchObject({ status: 200, text: 'replaced' });
    // The key is in progress until the handler's stream is read and stored: poll (with a garbage
    // collection each time, which lets fetch and Hono see their stream thrown away).
    const deadline = Date.now() + 20_000;
    let retry = await post(url, key);
    while (retry.status === 409 && retry.code === 'in_progress' && Date.now() < deadline) {
      gc();
      await sleep(50);
      retry = await post(url, key);
    }
    expect(retry).toMatchObject({ status: 200, text: HANDLER_BODY, replayed: 'true' });
    expect(runs.filter((run) => run === `${name} ${key}`)).toHaveLength(1);
  });
});
