/**
 * When a streamed body's client goes away (Fastify, fetch and Hono relay the handler's stream), the layer
 * reads the rest itself and stores it (the conformance suite checks that). It stops reading, and stops the
 * handler's stream, only when nothing more can be kept:
 * - past `maxExecution`: the execution's lease is lost, the stream is stopped, nothing is stored, and a
 *   retry takes the key over (until then, retries get 409: the key is never released by the client
 *   leaving);
 * - past `maxBodyBytes`: the `response_too_large` marker is stored and the stream is stopped.
 * On real sockets, with a stream that never ends.
 */
import { randomUUID } from 'node:crypto';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { serve } from '@hono/node-server';
import fastify, { type FastifyInstance } from 'fastify';
import { Hono } from 'hono';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idempotencyPlugin } from '../../../src/fastify/index.js';
import { withIdempotency } from '../../../src/fetch/index.js';
import { idempotency as honoIdempotency } from '../../../src/hono/index.js';
import { createIdempotency, memoryStore } from '../../../src/index.js';

/** Runs the engine saw end without an outcome (a stream stopped past maxExecution must be one). */
let failedRuns = 0;

// One short lease and execution bound: the stream outlives both.
const engine = createIdempotency({
  store: memoryStore(),
  namespace: `stream-bounds-${randomUUID()}`,
  leaseMs: '1s',
  maxExecution: '1s',
  hooks: {
    onFailed: () => {
      failedRuns++;
    },
  },
});

/** What the tests watch of each run of a handler: the key it ran for, and whether its stream was stopped. */
interface Run {
  key: string;
  stopped: boolean;
  /** Stop the run's timer (the stream's own stop does; the tests' teardown too). */
  halt(): void;
}
const runs: Run[] = [];
const runsOf = (key: string) => runs.filter((run) => run.key === key);

// An event every 20 ms, forever (until stopped): `size` bytes each.
function events(key: string, size: number) {
  let timer: NodeJS.Timeout | undefined;
  const run: Run = { key, stopped: false, halt: () => clearInterval(timer) };
  runs.push(run);
  let n = 0;
  return {
    next: () => Buffer.from(`data: ${++n} ${'x'.repeat(size)}\n\n`),
    start: (push: () => void) => {
      timer = setInterval(push, 20);
    },
    stop: () => {
      run.stopped = true;
      run.halt();
    },
  };
}

function nodeEvents(key: string, size: number): Readable {
  const source = events(key, size);
  const stream = new Readable({
    read() {},
    destroy(error, callback) {
      source.stop();
      callback(error);
    },
  });
  source.start(() => stream.push(source.next()));
  return stream;
}

function webEvents(key: string, size: number): ReadableStream<Uint8Array> {
  const source = events(key, size);
  return new ReadableStream<Uint8Array>({
    start(controller) {
      source.start(() => controller.enqueue(source.next()));
    },
    cancel() {
      source.stop();
    },
  });
}

interface ListeningFetch {
  url: string;
  close(): Promise<void>;
}

// As `listenFetch` (test/helpers), but closing the connections that still stream with the server.
async function listenFetch(
  fetchHandler: (request: Request) => Response | Promise<Response>,
  path: string,
): Promise<ListeningFetch> {
  const server = await new Promise<Server>((resolve) => {
    const s = serve({ fetch: fetchHandler, port: 0, hostname: '127.0.0.1' }, () =>
      resolve(s as Server),
    );
  });
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}${path}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

const sizeOf = (url: string) => Number(new URL(url).searchParams.get('size') ?? '10');

let fastifyApp: FastifyInstance;
let fetchServer: ListeningFetch;
let honoServer: ListeningFetch;
const bases: Record<string, string> = {};

beforeAll(async () => {
  // Connections that still stream are closed with the server (Fastify's default waits for them).
  fastifyApp = fastify({ forceCloseConnections: true });
  await fastifyApp.register(idempotencyPlugin, { engine, maxBodyBytes: 4096 });
  fastifyApp.post('/events', async (request, reply) => {
    const key = String(request.headers['idempotency-key']);
    return reply.type('text/event-stream').send(nodeEvents(key, sizeOf(`http://x${request.url}`)));
  });
  await fastifyApp.listen({ port: 0, host: '127.0.0.1' });
  bases.fastify = `http://127.0.0.1:${(fastifyApp.server.address() as AddressInfo).port}/events`;

  const handler = withIdempotency(
    async (request: Request) =>
      new Response(webEvents(String(request.headers.get('idempotency-key')), sizeOf(request.url)), {
        headers: { 'content-type': 'text/event-stream' },
      }),
    { engine, maxBodyBytes: 4096 },
  );
  fetchServer = await listenFetch(handler, '/events');
  bases.fetch = fetchServer.url;

  const hono = new Hono();
  hono.post('/events', honoIdempotency({ engine, maxBodyBytes: 4096 }), (c) => {
    const stream = webEvents(String(c.req.header('idempotency-key')), sizeOf(c.req.url));
    return c.body(stream, 200, { 'content-type': 'text/event-stream' });
  });
  honoServer = await listenFetch(hono.fetch, '/events');
  bases.hono = honoServer.url;
});

afterAll(async () => {
  for (const run of runs) run.halt();
  await fastifyApp?.close();
  await fetchServer?.close();
  await honoServer?.close();
});

/** Open the stream, read its first chunk, and leave (the connection is closed). */
async function openAndLeave(url: string, key: string): Promise<void> {
  const controller = new AbortController();
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'idempotency-key': key },
    signal: controller.signal,
  });
  expect(response.status).toBe(200);
  const reader = (response.body as ReadableStream<Uint8Array>).getReader();
  await reader.read();
  controller.abort();
  await reader.read().catch(() => undefined);
}

async function until(condition: () => boolean, what: string, ms = 20_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await sleep(20);
  }
}

async function post(url: string, key: string) {
  const response = await fetch(url, { method: 'POST', headers: { 'idempotency-key': key } });
  if (response.headers.get('content-type')?.startsWith('application/problem+json')) {
    return { status: response.status, code: ((await response.json()) as { code: string }).code };
  }
  await response.body?.cancel();
  return { status: response.status, code: undefined };
}

describe.each(['fastify', 'fetch', 'hono'])('%s', (name) => {
  it('keeps the key of a stream whose client left in progress, and stops the stream once maxExecution has passed: a retry then takes the key over', async () => {
    const key = randomUUID();
    const url = bases[name]!;
    await openAndLeave(url, key);
    // The client left; the stream runs on, read by the layer, and the key is not released.
    const during = await post(url, key);
    expect(during).toEqual({ status: 409, code: 'in_progress' });
    expect(runsOf(key)[0]!.stopped).toBe(false);
    const failedBefore = failedRuns;
    // Past maxExecution (1 s) the lease is lost within half a lease: the layer stops the stream.
    await until(() => runsOf(key)[0]!.stopped, 'the stream is stopped');
    // And the run ends: it does not stay pending, holding what it captured, for as long as the process.
    await until(() => failedRuns > failedBefore, 'the stopped run settles');
    // A retry takes the key over once the lease has passed (never a replay of a cut body).
    let retry = await post(url, key);
    for (let i = 0; i < 250 && retry.status === 409 && retry.code === 'in_progress'; i++) {
      await sleep(20);
      retry = await post(url, key);
    }
    expect(retry).toEqual({ status: 200, code: undefined });
    expect(runsOf(key)).toHaveLength(2);
  });

  it('stops a stream whose client left once it passes maxBodyBytes, and keeps the response_too_large marker', async () => {
    const key = randomUUID();
    // 1 KiB events against a 4 KiB limit: passed within a few events after the client left.
    const url = `${bases[name]!}?size=1000`;
    await openAndLeave(url, key);
    await until(() => runsOf(key)[0]!.stopped, 'the stream is stopped', 10_000);
    let retry = await post(url, key);
    for (let i = 0; i < 100 && retry.code === 'in_progress'; i++) {
      await sleep(20);
      retry = await post(url, key);
    }
    expect(retry).toEqual({ status: 409, code: 'response_too_large' });
    expect(runsOf(key)).toHaveLength(1);
  });
});
