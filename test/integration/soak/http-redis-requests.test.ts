/**
 * The Express middleware over a Redis store, for a thousand requests of every kind (executed, replayed,
 * in progress, mismatch, bad key, a handler that throws, a client that disconnects mid-request): what the
 * process holds between requests must not grow with them. Counted after a warm-up and again after many
 * more, on each client library: the listeners on the application's Redis client, and the timers left
 * armed (the store's deadline timer and the engine's heartbeat timers are cleared when nothing waits).
 */
import { randomUUID } from 'node:crypto';
import express from 'express';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idempotency } from '../../../src/express/index.js';
import { createIdempotency } from '../../../src/index.js';
import { redisStore } from '../../../src/redis/index.js';
import { env, requireService } from '../../helpers/env.js';
import { listenExpress } from '../../helpers/listen-express.js';
import {
  connectClient,
  deleteKeys,
  type RedisLib,
  type TestRedisClient,
} from '../../helpers/redis-clients.js';
import { waitUntil } from '../../helpers/wait-until.js';

const ROUNDS = 150;
const PARALLEL = 6;

/** Armed timers that keep the process alive (`process.getActiveResourcesInfo()`). */
const armedTimers = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;

describe.each<RedisLib>(['ioredis', 'node-redis'])('Express over a Redis store (%s)', (lib) => {
  const prefix = `idemtest:soak-http:${randomUUID().slice(0, 8)}:`;
  let redis: TestRedisClient;

  beforeAll(async () => {
    await requireService('Redis', env.redisUrl);
    redis = await connectClient(lib, env.redisUrl);
  });
  afterAll(async () => {
    if (redis !== undefined) await deleteKeys(redis.client, prefix);
    await redis?.close();
  });

  it('holds no more after a thousand requests than after the warm-up', async () => {
    // Arrange: a route whose body says what to do; held requests wait for the test to let them go.
    const held = new Map<string, () => void>();
    const engine = createIdempotency({
      store: redisStore({ client: redis.client, prefix }),
      leaseMs: '3s',
      cache: { maxEntries: 10 },
    });
    const app = express();
    app.use(express.json());
    app.post('/orders', idempotency({ engine }), async (req, res) => {
      if (req.body.throws) throw new Error('handler failed');
      if (req.body.hold) {
        await new Promise<void>((resolve) =>
          held.set(req.get('idempotency-key') as string, resolve),
        );
      }
      res.status(201).json({ n: req.body.n });
    });
    app.use((_error: Error, _req: express.Request, res: express.Response, _next: unknown) => {
      res.status(500).json({});
    });
    const url = `${await listenExpress(app)}/orders`;
    const statuses = new Map<number | string, number>();
    const post = async (key: string, body: object, signal?: AbortSignal) => {
      const response = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': key },
        body: JSON.stringify(body),
        signal,
      });
      await response.arrayBuffer();
      statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1);
    };
    const release = (key: string) => {
      held.get(key)?.();
      held.delete(key);
    };
    // One round: every kind of request, in the order a client's retries would make them.
    const round = async (i: number) => {
      const key = `${lib}-${i}`;
      await post(key, { n: i });
      await post(key, { n: i }); // replayed
      await post(key, { n: i + 1 }); // 422 mismatch
      await post('k'.repeat(300), { n: i }); // 400 invalid key
      await post(`throws-${key}`, { throws: true }); // 500, released
      const first = post(`held-${key}`, { hold: true });
      await waitUntil('the held request to run', () => held.has(`held-${key}`));
      await post(`held-${key}`, { hold: true }); // 409 in progress
      // A client that goes away mid-request: the handler still finishes and completes.
      const leaving = new AbortController();
      const gone = post(`gone-${key}`, { hold: true }, leaving.signal).catch(() => {
        statuses.set('aborted', (statuses.get('aborted') ?? 0) + 1);
      });
      await waitUntil('the abandoned request to run', () => held.has(`gone-${key}`));
      leaving.abort();
      await gone;
      release(`gone-${key}`);
      release(`held-${key}`);
      await first;
    };
    const rounds = async (from: number, to: number) => {
      let next = from;
      await Promise.all(
        Array.from({ length: PARALLEL }, async () => {
          while (next < to) await round(next++);
        }),
      );
    };
    // What the process holds between requests, once the last completions are in.
    const between = async () => {
      await waitUntil('no timer armed by the requests', () => armedTimers() === 0, 5000).catch(
        () => {},
      );
      return { listeners: listenersOf(redis.client), timers: armedTimers() };
    };
    await rounds(0, 20);
    const afterWarmUp = await between();
    // Act
    await rounds(20, ROUNDS);
    // Assert
    expect(Object.fromEntries(statuses)).toEqual({
      201: 3 * ROUNDS,
      400: ROUNDS,
      409: ROUNDS,
      422: ROUNDS,
      500: ROUNDS,
      aborted: ROUNDS,
    });
    expect(await between()).toEqual(afterWarmUp);
  });
});

/** Every event the client has listeners for, with how many. */
function listenersOf(client: unknown): Record<string, number> {
  const emitter = client as {
    eventNames(): (string | symbol)[];
    listenerCount(event: string | symbol): number;
  };
  return Object.fromEntries(
    emitter.eventNames().map((name) => [String(name), emitter.listenerCount(name)]),
  );
}
