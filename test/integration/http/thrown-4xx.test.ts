/**
 * A thrown error is judged by the response the framework made of it, on every adapter that renders one: a
 * 4xx (a declined card, thrown as the framework's HTTP error) is the handler's answer, stored and replayed,
 * so a retry does not charge again; a 5xx releases the key.
 */
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import express from 'express';
import fastify from 'fastify';
import { Hono } from 'hono';
import { HTTPException } from 'hono/http-exception';
import { afterEach, describe, expect, it } from 'vitest';
import { idempotency as expressIdempotency } from '../../../src/express/index.js';
import { idempotencyPlugin } from '../../../src/fastify/index.js';
import { idempotency as honoIdempotency } from '../../../src/hono/index.js';
import { memoryStore } from '../../../src/index.js';

interface Running {
  base: string;
  close(): Promise<void>;
}

/** Each adapter's app: POST /charge throws "declined" (402) or "broken" (500), by the x-outcome header. */
const apps: Record<string, (count: () => void) => Promise<Running>> = {
  async express(count) {
    const app = express();
    app.use(expressIdempotency({ store: memoryStore() }));
    app.post('/charge', (req, _res, next) => {
      count();
      const status = req.headers['x-outcome'] === 'declined' ? 402 : 500;
      next(Object.assign(new Error('card declined'), { status }));
    });
    app.use(
      (
        error: Error & { status: number },
        _req: express.Request,
        res: express.Response,
        _next: express.NextFunction,
      ) => {
        res.status(error.status).json({ error: error.message });
      },
    );
    const server = app.listen(0, '127.0.0.1');
    await new Promise((done) => server.once('listening', done));
    return {
      base: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
      close: () => new Promise((done) => server.close(() => done())),
    };
  },
  async fastify(count) {
    const app = fastify();
    await app.register(idempotencyPlugin, { store: memoryStore() });
    app.post('/charge', async (request) => {
      count();
      const statusCode = request.headers['x-outcome'] === 'declined' ? 402 : 500;
      throw Object.assign(new Error('card declined'), { statusCode });
    });
    await app.listen({ port: 0, host: '127.0.0.1' });
    return {
      base: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`,
      close: () => app.close(),
    };
  },
  async hono(count) {
    const app = new Hono();
    // Hono's own onError, without its console.error of the 500.
    app.onError((error, c) =>
      error instanceof HTTPException ? error.getResponse() : c.text('broken', 500),
    );
    app.use(honoIdempotency({ store: memoryStore() }));
    app.post('/charge', (c) => {
      count();
      if (c.req.header('x-outcome') === 'declined') {
        throw new HTTPException(402, { message: 'card declined' });
      }
      throw new Error('broken');
    });
    const server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' });
    await new Promise((done) => server.once('listening', done));
    return {
      base: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
      close: () => new Promise((done) => server.close(() => done())),
    };
  },
};

let running: Running | undefined;
afterEach(async () => {
  await running?.close();
  running = undefined;
});

describe.each(Object.keys(apps))('%s: a thrown error', (name) => {
  async function start() {
    let runs = 0;
    running = await (apps[name] as (typeof apps)['express'])(() => runs++);
    const base = running.base;
    const charge = (key: string, outcome: string) =>
      fetch(`${base}/charge`, {
        method: 'POST',
        headers: { 'idempotency-key': key, 'x-outcome': outcome },
      });
    return { charge, runs: () => runs };
  }

  it('rendered as a 4xx is stored and replayed: the retry does not run again', async () => {
    const { charge, runs } = await start();
    const key = randomUUID();
    const first = await charge(key, 'declined');
    const retry = await charge(key, 'declined');
    expect(first.status).toBe(402);
    expect(retry.status).toBe(402);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(await retry.text()).toBe(await first.text());
    expect(runs()).toBe(1);
  });

  it('rendered as a 5xx releases the key: the retry runs again', async () => {
    const { charge, runs } = await start();
    const key = randomUUID();
    expect((await charge(key, 'broken')).status).toBe(500);
    const retry = await charge(key, 'broken');
    expect(retry.status).toBe(500);
    expect(retry.headers.get('idempotent-replayed')).toBeNull();
    expect(runs()).toBe(2);
  });
});
