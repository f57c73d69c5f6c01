/**
 * Child process of `bench/http.ts` and `bench/http-cpu.ts`: one server (Express, Fastify or Hono; baseline,
 * or behind the idempotency layer on one store), so the load generator and the server do not share an event
 * loop. Configuration comes in `IK_BENCH_HTTP` (JSON); the port goes back over IPC. On a `'cpu'` message
 * the child answers with its `process.cpuUsage()`, so the parent can measure the server's own CPU time.
 */
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import type { Store } from '../../src/index.js';
import { libraryModule } from './library.js';

/** What the parent asks for. */
export interface BenchServerConfig {
  /**
   * `'redis-floor'`: no idempotency layer, but one Redis round trip (PING) before the handler and one
   * before the response is released, as a claim and a completion would make: what any layer that claims
   * before running the handler and stores the response before sending it costs at the least (Express only).
   */
  store: 'none' | 'memory' | 'sqlite' | 'redis' | 'postgres' | 'redis-floor';
  /** Framework. @default 'express' */
  adapter?: 'express' | 'fastify' | 'hono';
  delayMs: number;
  sqliteFile?: string;
  redisUrl?: string;
  redisPrefix?: string;
  databaseUrl?: string;
  pgSchema?: string;
  /**
   * Load the library from this source tree instead of `src/` (an absolute path; for A/B measurements of a
   * change against a snapshot). @default the repository's `src/`
   */
  src?: string;
  /**
   * Time each request's phases (Express only, `bench/http-phases.ts`): from its arrival to the handler's
   * start, the handler itself, and from the handler's answer to the response's `finish`; a `'phases'`
   * message answers with the times gathered since the last one ({@link BenchPhasesReport}).
   */
  phases?: boolean;
}

/** The child's answer to a `'phases'` message: per request, in ms. */
export interface BenchPhasesReport {
  phases: { beforeHandler: number[]; handler: number[]; afterHandler: number[] };
}

/** The child's answer to a `'cpu'` message. */
export interface BenchCpuReport {
  cpu: NodeJS.CpuUsage;
}

const config = JSON.parse(process.env.IK_BENCH_HTTP ?? '{}') as BenchServerConfig;
const src = config.src ?? fileURLToPath(new URL('../../src', import.meta.url));
const lib = <T>(path: string): Promise<T> => libraryModule<T>(src, path);

async function createStore(): Promise<Store | undefined> {
  switch (config.store) {
    case 'none':
    case 'redis-floor':
      return undefined;
    case 'memory':
      return (await lib<typeof import('../../src/index.js')>('index.js')).memoryStore();
    case 'sqlite': {
      const { sqliteStore } =
        await lib<typeof import('../../src/sqlite/index.js')>('sqlite/index.js');
      return sqliteStore({ database: config.sqliteFile!, synchronous: 'normal' });
    }
    case 'redis': {
      const { createClient } = await import('redis');
      const { redisStore } = await lib<typeof import('../../src/redis/index.js')>('redis/index.js');
      const client = createClient({ url: config.redisUrl! });
      await client.connect();
      return redisStore({ client, prefix: config.redisPrefix!, checkEvictionPolicy: false });
    }
    case 'postgres': {
      const pg = (await import('pg')).default;
      const { postgresStore } =
        await lib<typeof import('../../src/postgres/index.js')>('postgres/index.js');
      const pool = new pg.Pool({ connectionString: config.databaseUrl!, max: 20 });
      return postgresStore({ pool, schema: config.pgSchema! });
    }
  }
}

/** Per-request phase times while `config.phases` is set (see {@link BenchServerConfig.phases}). */
const phases: BenchPhasesReport['phases'] = { beforeHandler: [], handler: [], afterHandler: [] };
const arrivals = new WeakMap<object, number>();

/** The first middleware: notes the request's arrival (Express has read its head; the body comes after). */
function phaseClock(): import('express').RequestHandler {
  return (req, _res, next) => {
    arrivals.set(req, performance.now());
    next();
  };
}

/** Runs the handler, noting when it starts and answers. */
async function timedHandler(req: object, res: import('express').Response, answer: () => void) {
  const start = performance.now();
  phases.beforeHandler.push(start - (arrivals.get(req) ?? start));
  await delay();
  const answered = performance.now();
  phases.handler.push(answered - start);
  res.once('finish', () => phases.afterHandler.push(performance.now() - answered));
  answer();
}

const delay = () =>
  config.delayMs > 0 ? new Promise((resolve) => setTimeout(resolve, config.delayMs)) : undefined;

async function startExpress(store: Store | undefined): Promise<number> {
  const express = (await import('express')).default;
  const { idempotency } =
    await lib<typeof import('../../src/express/index.js')>('express/index.js');
  const app = express();
  if (config.phases) app.use(phaseClock());
  app.use(express.json());
  if (store !== undefined) app.use(idempotency({ store }));
  if (config.store === 'redis-floor') app.use(await redisRoundTrips());
  const answer = (req: import('express').Request, res: import('express').Response) =>
    res.status(201).json({ id: 'ord_123', amount: (req.body as { amount?: number }).amount ?? 0 });
  app.post('/orders', async (req, res) => {
    if (config.phases) return timedHandler(req, res, () => answer(req, res));
    await delay();
    answer(req, res);
  });
  return new Promise((resolve) => {
    const server = app.listen(0, '127.0.0.1', () => {
      resolve((server.address() as AddressInfo).port);
    });
  });
}

/**
 * The floor row's middleware: a Redis PING before the handler, and another between the handler's `end` and
 * the real one. node-redis pipelines the PINGs of one turn of the event loop into one write, as the store's
 * batching gathers claims and completions. Patching `end` on each response costs Express 5 a few µs of CPU
 * (see src/express/capture.ts), so in the CPU-bound S2 the floor is a little lower than it could be; in S1
 * the server is mostly idle and the round trips decide.
 */
async function redisRoundTrips(): Promise<import('express').RequestHandler> {
  const { createClient } = await import('redis');
  // Without node-redis's own per-command timeout, as the store sends its commands (see src/redis/client.ts):
  // that timeout costs an `AbortSignal.timeout` per command, about 12 µs of CPU each on this machine.
  const client = createClient({ url: config.redisUrl!, commandOptions: { timeout: 0 } });
  await client.connect();
  return (_req, res, next) => {
    client.ping().then(() => {
      const end = res.end as (...args: unknown[]) => unknown;
      res.end = ((...args: unknown[]) => {
        client.ping().then(() => end.apply(res, args));
        return res;
      }) as typeof res.end;
      next();
    }, next);
  };
}

async function startFastify(store: Store | undefined): Promise<number> {
  const fastify = (await import('fastify')).default;
  const { idempotencyPlugin } =
    await lib<typeof import('../../src/fastify/index.js')>('fastify/index.js');
  const app = fastify();
  if (store !== undefined) await app.register(idempotencyPlugin, { store });
  app.post('/orders', async (request, reply) => {
    await delay();
    reply.code(201);
    return { id: 'ord_123', amount: (request.body as { amount?: number }).amount ?? 0 };
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  return (app.server.address() as AddressInfo).port;
}

async function startHono(store: Store | undefined): Promise<number> {
  const { Hono } = await import('hono');
  const { serve } = await import('@hono/node-server');
  const { idempotency } = await lib<typeof import('../../src/hono/index.js')>('hono/index.js');
  const app = new Hono();
  if (store !== undefined) app.use('/orders', idempotency({ store }));
  app.post('/orders', async (c) => {
    await delay();
    const body = (await c.req.json()) as { amount?: number };
    return c.json({ id: 'ord_123', amount: body.amount ?? 0 }, 201);
  });
  return new Promise((resolve) => {
    serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, (info) => resolve(info.port));
  });
}

const store = await createStore();
const adapter = config.adapter ?? 'express';
const port =
  adapter === 'fastify'
    ? await startFastify(store)
    : adapter === 'hono'
      ? await startHono(store)
      : await startExpress(store);
process.on('message', (message) => {
  if (message === 'cpu') process.send?.({ cpu: process.cpuUsage() } satisfies BenchCpuReport);
  if (message === 'phases') {
    process.send?.({ phases: { ...phases } } satisfies BenchPhasesReport);
    phases.beforeHandler = [];
    phases.handler = [];
    phases.afterHandler = [];
  }
});
process.send?.({ port });
process.on('disconnect', () => process.exit(0));
