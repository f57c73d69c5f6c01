/**
 * An error after the handler's answer (a throw or `next(err)` after `res.json`, or an error handler that
 * passes it on once `res.headersSent`) reaches Express's final handler, which closes the connection with
 * `req.socket.destroy()`. Without the layer the answer had been written before that, and the client got
 * it; with the handler's `end` held until its outcome is stored, the destroy came first and the client got
 * no response at all (its retry got the replay). The destroy now waits for the held answer: the client
 * gets its 201, the connection is still closed after it, and the handler ran once. Express 5 and 4 on
 * the memory store, and an Express 5 `async` handler whose rejection comes while Redis stores the answer.
 */
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import express4 from 'express4';
import { afterAll, describe, expect, it } from 'vitest';
import { HELD_DESTROY_LIMIT_MS } from '../../../src/express/held-socket.js';
import { idempotency } from '../../../src/express/index.js';
import { memoryStore } from '../../../src/index.js';
import { redisStore } from '../../../src/redis/index.js';
import { env, requireService } from '../../helpers/env.js';
import { heldStore } from '../../helpers/held-store.js';
import { listenExpress } from '../../helpers/listen-express.js';
import { connectClient, deleteKeys, type TestRedisClient } from '../../helpers/redis-clients.js';

interface Raw {
  status: number;
  body: string;
  /** The connection was closed by the server once the response was read. */
  closed: Promise<void>;
}

// A raw client on a connection of its own, to see the server close it.
function post(base: string, path: string, key: string): Promise<Raw> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      `${base}${path}`,
      { method: 'POST', headers: { 'idempotency-key': key }, agent: false },
      (res) => {
        const closed = new Promise<void>((done) => res.socket.once('close', () => done()));
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          body += chunk;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body, closed }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end();
  });
}

describe.each([
  ['Express 5', express],
  ['Express 4', express4 as unknown as typeof express],
])('%s: an error after the answer', (_name, framework) => {
  it('sends the held answer before the final handler closes the connection', async () => {
    const runs = new Map<string, number>();
    const run = (req: express.Request) => {
      const count = (runs.get(req.path) ?? 0) + 1;
      runs.set(req.path, count);
      return count;
    };
    const app = framework();
    app.use(idempotency({ store: memoryStore() }));
    app.post('/throw', (req, res) => {
      res.status(201).json({ charged: run(req) });
      throw new Error('audit log failed');
    });
    app.post('/next-error', (req, res, next) => {
      res.status(201).json({ charged: run(req) });
      next(new Error('audit log failed'));
    });
    app.post('/guarded', (req, res, next) => {
      res.status(201).json({ charged: run(req) });
      next(new Error('audit log failed'));
    });
    // The usual guard, on /guarded only: an error after the response went out is passed on.
    app.use(
      '/guarded',
      (error: Error, _req: express.Request, res: express.Response, next: express.NextFunction) => {
        if (res.headersSent) return next(error);
        res.status(500).json({ error: error.message });
      },
    );
    // Express's final handler logs the error it cannot answer: kept out of the test output.
    app.set('env', 'test');
    const base = await listenExpress(app);
    for (const path of ['/throw', '/next-error', '/guarded']) {
      const key = randomUUID();
      const first = await post(base, path, key);
      expect(first.status, path).toBe(201);
      expect(JSON.parse(first.body)).toEqual({ charged: 1 });
      // The final handler's destroy still happens, once the answer went out.
      await first.closed;
      const retry = await post(base, path, key);
      expect(retry.status).toBe(201);
      expect(JSON.parse(retry.body)).toEqual({ charged: 1 });
      expect(runs.get(path)).toBe(1);
    }
  });
});

describe('Express 5 on Redis: an async handler that rejects after answering', () => {
  const prefix = `idemtest:held-end:${randomUUID()}:`;
  let connection: TestRedisClient | undefined;

  afterAll(async () => {
    if (connection === undefined) return;
    await deleteKeys(connection.client, prefix);
    await connection.close();
  });

  it('sends the held answer: the rejection reaches the final handler while Redis stores it', async () => {
    await requireService('Redis', env.redisUrl);
    connection = await connectClient('node-redis', env.redisUrl);
    const store = redisStore({ client: connection.client, prefix, checkEvictionPolicy: false });
    let runs = 0;
    const app = express();
    app.set('env', 'test');
    app.use(idempotency({ store }));
    app.post('/charges', async (_req, res) => {
      runs++;
      res.status(201).json({ charged: runs });
      await Promise.resolve(); // the audit log, after the answer
      throw new Error('audit log failed');
    });
    const base = await listenExpress(app);
    const key = randomUUID();
    const first = await post(base, '/charges', key);
    expect(first.status).toBe(201);
    expect(JSON.parse(first.body)).toEqual({ charged: 1 });
    await first.closed;
    const retry = await post(base, '/charges', key);
    expect(JSON.parse(retry.body)).toEqual({ charged: 1 });
    expect(runs).toBe(1);
  });
});

describe('Express 5: a connection closed while its answer waits for a store that does not answer', () => {
  it('closes within the limit, so a shutdown is not held by the store', async () => {
    const held = heldStore(memoryStore());
    held.hold('complete', true);
    const app = express();
    app.use(idempotency({ store: held.store }));
    app.post('/charges', (_req, res) => {
      res.status(201).json({ charged: true });
    });
    const server = app.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const { port } = server.address() as AddressInfo;
    const reply = post(`http://127.0.0.1:${port}`, '/charges', randomUUID()).catch(
      (error: unknown) => error,
    );
    await until(() => held.held('complete') === 1);

    // A shutdown while the completion hangs (a store outage, a store without timeouts).
    const startedAt = performance.now();
    server.closeAllConnections();
    await new Promise((done) => server.close(done));
    const waited = performance.now() - startedAt;

    // Closed after the limit (the answer had its chance), not when the store answers: before, never.
    expect(waited).toBeGreaterThanOrEqual(HELD_DESTROY_LIMIT_MS - 50);
    expect(waited).toBeLessThan(HELD_DESTROY_LIMIT_MS + 1500);
    expect(await reply).toBeInstanceOf(Error);
    await held.answerOldest('complete');
  }, 10_000);
});

async function until(condition: () => boolean): Promise<void> {
  while (!condition()) await new Promise((resolve) => setTimeout(resolve, 5));
}
