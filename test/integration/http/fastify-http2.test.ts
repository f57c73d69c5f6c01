/**
 * The Fastify plugin on HTTP/2 (`http2: true`, cleartext h2c through `node:http2`'s client), on the memory
 * and Redis stores: keys, replays, 409 and 422 as on HTTP/1.1; the stored headers are the allowed ones,
 * lower-case, never a pseudo-header such as `:status`; and a client that cancels its stream while the
 * handler runs (RST_STREAM, what a client timeout sends) gets the handler's response as a replay on its
 * retry. HTTP/2's compatibility layer emits `finish` when a stream closes, answered or not: the plugin took
 * that for a response written around its capture and kept a `response_not_captured` marker, so every
 * retry of that key got 409 and the handler's response was lost.
 */
import { randomUUID } from 'node:crypto';
import { type ClientHttp2Session, connect } from 'node:http2';
import type { AddressInfo } from 'node:net';
import Fastify from 'fastify';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { idempotencyPlugin } from '../../../src/fastify/index.js';
import { memoryStore, type Store } from '../../../src/index.js';
import { redisStore } from '../../../src/redis/index.js';
import { env, requireService } from '../../helpers/env.js';
import { connectClient, deleteKeys, type TestRedisClient } from '../../helpers/redis-clients.js';

interface Answer {
  status: number | undefined;
  headers: Record<string, unknown>;
  body: string;
}

/** One request on `session`; with `cancelAfter`, the client cancels its stream after that many ms. */
function request(
  session: ClientHttp2Session,
  path: string,
  key: string,
  body: string,
  cancelAfter?: number,
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const stream = session.request({
      ':method': 'POST',
      ':path': path,
      'idempotency-key': key,
      'content-type': 'application/json',
    });
    let headers: Record<string, unknown> = {};
    let text = '';
    stream.on('response', (received) => {
      headers = { ...received };
    });
    stream.setEncoding('utf8');
    stream.on('data', (chunk: string) => {
      text += chunk;
    });
    stream.on('close', () =>
      resolve({ status: headers[':status'] as number | undefined, headers, body: text }),
    );
    stream.on('error', reject);
    stream.end(body);
    if (cancelAfter !== undefined) setTimeout(() => stream.close(8 /* CANCEL */), cancelAfter);
  });
}

async function serve(store: Store, runs: Map<string, number>): Promise<ClientHttp2Session> {
  const app = Fastify({ http2: true });
  await app.register(idempotencyPlugin, { store, replayHeaders: ['link'] });
  app.post('/orders', async (req, reply) => {
    runs.set('/orders', (runs.get('/orders') ?? 0) + 1);
    reply.code(201).header('Link', ['</a>; rel="a"', '</b>; rel="b"']);
    return { order: (req.body as { item: string }).item, run: runs.get('/orders') };
  });
  app.post('/slow', async () => {
    runs.set('/slow', (runs.get('/slow') ?? 0) + 1);
    await new Promise((done) => setTimeout(done, 300));
    return { charged: true, run: runs.get('/slow') };
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const session = connect(`http://127.0.0.1:${(app.server.address() as AddressInfo).port}`);
  session.on('error', () => {});
  onTestFinished(async () => {
    session.destroy();
    await app.close();
  });
  return session;
}

describe('Fastify on HTTP/2 (memory and Redis)', () => {
  const prefix = `idemtest:fastify-h2:${randomUUID()}:`;
  let redis: TestRedisClient;
  const stores: Array<[string, () => Store]> = [['memory', () => memoryStore()]];

  beforeAll(async () => {
    await requireService('Redis', env.redisUrl);
    redis = await connectClient('node-redis', env.redisUrl);
    stores.push([
      'Redis',
      () => redisStore({ client: redis.client, prefix, checkEvictionPolicy: false }),
    ]);
  });

  afterAll(async () => {
    if (redis === undefined) return;
    await deleteKeys(redis.client, prefix);
    await redis.close();
  });

  it('answers, replays, 409 and 422 as on HTTP/1.1, and stores no pseudo-header', async () => {
    for (const [name, makeStore] of stores) {
      const runs = new Map<string, number>();
      const session = await serve(makeStore(), runs);
      const key = randomUUID();
      const first = await request(session, '/orders', key, '{"item":"tea"}');
      expect([first.status, first.body], name).toEqual([201, '{"order":"tea","run":1}']);
      const replay = await request(session, '/orders', key, '{ "item": "tea" }');
      expect([replay.status, replay.body, replay.headers['idempotent-replayed']], name).toEqual([
        201,
        '{"order":"tea","run":1}',
        'true',
      ]);
      // Exactly the first response's headers, lower-case (HTTP/2 allows no other), and no `:status`
      // among them (the client library adds the replay's own).
      const { date: _d, 'idempotent-replayed': _r, ...replayed } = replay.headers;
      const { date: _d1, ...sent } = first.headers;
      expect(replayed, name).toEqual(sent);
      expect(replay.headers.link, name).toBe('</a>; rel="a", </b>; rel="b"');
      const mismatch = await request(session, '/orders', key, '{"item":"coffee"}');
      expect(mismatch.status, name).toBe(422);

      const slowKey = randomUUID();
      const running = request(session, '/slow', slowKey, '{}');
      await new Promise((done) => setTimeout(done, 100));
      const conflict = await request(session, '/slow', slowKey, '{}');
      expect(conflict.status, name).toBe(409);
      expect(JSON.parse(conflict.body).code, name).toBe('in_progress');
      expect((await running).status, name).toBe(200);
      expect(runs.get('/orders'), name).toBe(1);
    }
  });

  it('replays the handler’s response to the retry of a client that cancelled its stream, never a 409 marker', async () => {
    for (const [name, makeStore] of stores) {
      const runs = new Map<string, number>();
      const session = await serve(makeStore(), runs);
      const key = randomUUID();
      const cancelled = await request(session, '/slow', key, '{}', 50);
      expect(cancelled.status, name).toBeUndefined();
      let retry = await request(session, '/slow', key, '{}');
      for (let i = 0; i < 100 && retry.status === 409; i++) {
        // Only `in_progress` while the handler runs; a marker would be final.
        expect(JSON.parse(retry.body).code, name).toBe('in_progress');
        await new Promise((done) => setTimeout(done, 50));
        retry = await request(session, '/slow', key, '{}');
      }
      expect([retry.status, retry.body, retry.headers['idempotent-replayed']], name).toEqual([
        200,
        '{"charged":true,"run":1}',
        'true',
      ]);
      expect(runs.get('/slow'), name).toBe(1);
    }
  });
});
