/**
 * A replay stored gzip-encoded (a compression step inside the layer: Express's `compression` mounted after
 * the middleware, a Fastify `onSend` hook added before the plugin), on the Redis and PostgreSQL stores: a
 * retry that accepts gzip gets the stored bytes with their Content-Encoding, byte for byte; one that
 * accepts only `identity` gets them decoded, without Content-Encoding (earlier versions sent it the gzip
 * bytes, which it cannot read); one without `Accept-Encoding` (any coding acceptable) gets them as stored.
 * The handler runs once. Through node:http, which neither adds an Accept-Encoding nor decodes the answer.
 */
import { randomUUID } from 'node:crypto';
import { request } from 'node:http';
import { gunzipSync, gzipSync } from 'node:zlib';
import compression from 'compression';
import express from 'express';
import fastify, { type FastifyReply, type FastifyRequest } from 'fastify';
import { afterAll, describe, expect, it, onTestFinished } from 'vitest';
import { idempotency } from '../../../src/express/index.js';
import { idempotencyPlugin } from '../../../src/fastify/index.js';
import { postgresStore } from '../../../src/postgres/index.js';
import { redisStore } from '../../../src/redis/index.js';
import type { Store } from '../../../src/store/store.js';
import { env, requireService } from '../../helpers/env.js';
import { listenExpress } from '../../helpers/listen-express.js';
import { type PostgresFixture, setupPostgres } from '../../helpers/postgres-env.js';
import { connectClient, deleteKeys, type TestRedisClient } from '../../helpers/redis-clients.js';

const redisPrefix = `idemtest:hfp-encoding:${randomUUID().slice(0, 8)}:`;
let redis: TestRedisClient | undefined;
let postgres: PostgresFixture | undefined;

afterAll(async () => {
  if (redis !== undefined) {
    await deleteKeys(redis.client, redisPrefix);
    await redis.close();
  }
  await postgres?.dispose();
});

const backends: Array<[string, () => Promise<Store>]> = [
  [
    'redis',
    async () => {
      await requireService('Redis', env.redisUrl);
      redis ??= await connectClient('node-redis', env.redisUrl);
      return redisStore({ client: redis.client, prefix: redisPrefix, checkEvictionPolicy: false });
    },
  ],
  [
    'postgres',
    async () => {
      postgres ??= await setupPostgres('hfp_encoding');
      return postgresStore({ pool: postgres.pool, schema: postgres.schema });
    },
  ],
];

interface Raw {
  status: number;
  encoding: string | undefined;
  replayed: string | undefined;
  bytes: Buffer;
}

function post(url: string, key: string, acceptEncoding: string | undefined): Promise<Raw> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = {
      'idempotency-key': key,
      'content-type': 'application/json',
    };
    if (acceptEncoding !== undefined) headers['accept-encoding'] = acceptEncoding;
    const sent = request(url, { method: 'POST', headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('error', reject);
      res.on('end', () =>
        resolve({
          status: res.statusCode ?? 0,
          encoding: res.headers['content-encoding'],
          replayed: res.headers['idempotent-replayed'] as string | undefined,
          bytes: Buffer.concat(chunks),
        }),
      );
    });
    sent.on('error', reject);
    sent.end('{"amount":4200}');
  });
}

const answer = JSON.stringify({ id: 'ch_1', amount: 4200, note: 'x'.repeat(500) });

interface Served {
  url: string;
  runs(): number;
}

async function expressAfter(store: Store): Promise<Served> {
  let runs = 0;
  const app = express();
  app.use(idempotency({ store, key: 'required' }), compression({ threshold: 0 }));
  app.post('/charge', (_req, res) => {
    runs++;
    res.status(201).type('application/json').send(answer);
  });
  return { url: `${await listenExpress(app)}/charge`, runs: () => runs };
}

// A minimal compression hook, added before the plugin so it runs before the plugin's capture.
async function gzipHook(request: FastifyRequest, reply: FastifyReply, payload: unknown) {
  const accepted = String(request.headers['accept-encoding'] ?? '').includes('gzip');
  if (!accepted || reply.getHeader('content-encoding') !== undefined) return payload;
  if (typeof payload !== 'string') return payload;
  reply.header('content-encoding', 'gzip');
  return gzipSync(payload);
}

async function fastifyHookFirst(store: Store): Promise<Served> {
  let runs = 0;
  const app = fastify();
  onTestFinished(() => app.close());
  app.addHook('onSend', gzipHook);
  await app.register(idempotencyPlugin, { store, key: 'required' });
  app.post('/charge', async (_request, reply) => {
    runs++;
    return reply.code(201).type('application/json').send(answer);
  });
  return { url: `${await app.listen({ port: 0, host: '127.0.0.1' })}/charge`, runs: () => runs };
}

describe.each(backends)('a replay stored gzip-encoded (%s store)', (_name, create) => {
  it.each([
    ['Express, compression mounted after the middleware', expressAfter],
    ['Fastify, an onSend gzip hook added before the plugin', fastifyHookFirst],
  ])('%s: decoded for a retry that does not accept gzip', async (_server, start) => {
    const { url, runs } = await start(await create());
    const key = `k-${randomUUID()}`;
    // Act
    const first = await post(url, key, 'gzip');
    const gzipped = await post(url, key, 'gzip;q=1.0, identity;q=0.5');
    const identity = await post(url, key, 'identity');
    const refused = await post(url, key, 'br, gzip;q=0');
    // No Accept-Encoding (curl without --compressed): identity only, as the compression middlewares read it.
    const none = await post(url, key, undefined);
    // Assert
    expect(first.encoding).toBe('gzip');
    expect(gunzipSync(first.bytes).toString()).toBe(answer);
    expect(gzipped.replayed).toBe('true');
    expect(gzipped.encoding).toBe('gzip');
    expect(gzipped.bytes.equals(first.bytes)).toBe(true);
    for (const decoded of [identity, refused, none]) {
      expect(decoded.status).toBe(201);
      expect(decoded.replayed).toBe('true');
      expect(decoded.encoding).toBeUndefined();
      expect(decoded.bytes.toString()).toBe(answer);
    }
    expect(runs()).toBe(1);
  });
});
