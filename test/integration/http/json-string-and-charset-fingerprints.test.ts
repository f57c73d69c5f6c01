/**
 * Two ways a key reused for another request was replayed the first request's answer, on real servers
 * (memory, Redis and PostgreSQL stores):
 * - a JSON body that is a bare string, `"123"`, which Fastify's JSON parser and
 *   `express.json({ strict: false })` hand over as the string `123`: the fingerprint read that string as
 *   JSON text, so the body `123` (a number), and `"{\"a\":1}"` vs `{"a":1}`, fingerprinted alike;
 * - the same bytes under two charsets (`{"a":"+AOk-"}` is `{"a":"é"}` as UTF-7; byte E9 is `é` in
 *   ISO-8859-1 but `И` in KOI8-R), which the parsers decode by the parameter the fingerprint left out.
 * Now each is 422 `key_mismatch` and the handler runs once (the middleware, and a `transactionalRoute`);
 * the same request retried, re-encoded (key order, whitespace, `charset=UTF-8` or none), is still replayed.
 */
import { randomUUID } from 'node:crypto';
import Database from 'better-sqlite3';
import express from 'express';
import fastify from 'fastify';
import { afterAll, describe, expect, it, onTestFinished } from 'vitest';
import { idempotency as expressIdempotency, keepRawBody } from '../../../src/express/index.js';
import { idempotencyPlugin, transactionalRoute } from '../../../src/fastify/index.js';
import { memoryStore } from '../../../src/index.js';
import { postgresStore } from '../../../src/postgres/index.js';
import { redisStore } from '../../../src/redis/index.js';
import { sqliteTransactional } from '../../../src/sqlite/index.js';
import type { Store } from '../../../src/store/store.js';
import { env, requireService } from '../../helpers/env.js';
import { listenExpress } from '../../helpers/listen-express.js';
import { type PostgresFixture, setupPostgres } from '../../helpers/postgres-env.js';
import { connectClient, deleteKeys, type TestRedisClient } from '../../helpers/redis-clients.js';

const redisPrefix = `idemtest:hfp-json-string:${randomUUID().slice(0, 8)}:`;
let redis: TestRedisClient | undefined;
let postgres: PostgresFixture | undefined;

const backends: Array<[string, () => Promise<Store>]> = [
  ['memory', async () => memoryStore()],
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
      postgres ??= await setupPostgres('hfp_json_string');
      return postgresStore({ pool: postgres.pool, schema: postgres.schema });
    },
  ],
];

afterAll(async () => {
  if (redis !== undefined) {
    await deleteKeys(redis.client, redisPrefix);
    await redis.close();
  }
  await postgres?.dispose();
});

interface Answer {
  status: number;
  replayed: string | null;
  body: { got?: unknown; code?: string };
}

async function post(url: string, key: string, body: string | Buffer, type: string) {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'idempotency-key': key, 'content-type': type },
    body,
  });
  const answer: Answer = {
    status: response.status,
    replayed: response.headers.get('idempotent-replayed'),
    body: (await response.json()) as Answer['body'],
  };
  return answer;
}

interface Served {
  url: string;
  runs(): number;
}

// Express with `parser` before the layer, or after it (the layer then reads the bytes).
async function startExpress(
  store: Store,
  parser: express.RequestHandler,
  order: 'parser first' | 'layer first' = 'parser first',
): Promise<Served> {
  let runs = 0;
  const app = express();
  const layer = expressIdempotency({ store, key: 'required' });
  const [outer, inner] = order === 'parser first' ? [parser, layer] : [layer, parser];
  app.post('/orders', outer, inner, (req, res) => {
    runs++;
    res.status(201).json({ got: req.body as unknown });
  });
  return { url: `${await listenExpress(app)}/orders`, runs: () => runs };
}

// Fastify with its own JSON parser, which reads any JSON value (a bare string too).
async function startFastify(store: Store): Promise<Served> {
  let runs = 0;
  const app = fastify();
  onTestFinished(() => app.close());
  await app.register(idempotencyPlugin, { store, key: 'required' });
  app.post('/orders', async (request, reply) => {
    runs++;
    return reply.code(201).send({ got: request.body });
  });
  return { url: `${await app.listen({ port: 0, host: '127.0.0.1' })}/orders`, runs: () => runs };
}

const JSON_TYPE = 'application/json';

describe.each(backends)(
  'fingerprints of JSON string bodies and charsets (%s store)',
  (_name, create) => {
    const servers: Array<[string, (store: Store) => Promise<Served>]> = [
      ['Fastify', startFastify],
      [
        'Express, express.json({ strict: false })',
        (store) => startExpress(store, express.json({ strict: false })),
      ],
    ];

    it.each(servers)(
      '%s: a JSON string whose text is JSON is not the value it spells',
      async (_server, start) => {
        const { url, runs } = await start(await create());
        const pairs = [
          ['"123"', '123'],
          ['"{\\"a\\":1}"', '{"a":1}'],
          ['"true"', 'true'],
        ] as const;
        for (const [index, [asString, asValue]] of pairs.entries()) {
          const key = `k-${randomUUID()}-${index}`;
          // Act
          const first = await post(url, key, asString, JSON_TYPE);
          const other = await post(url, key, asValue, JSON_TYPE);
          const retry = await post(url, key, asString, JSON_TYPE);
          // Assert: the string was the first request; the value it spells is another
          expect(first.status, asString).toBe(201);
          expect(first.body.got, asString).toBe(JSON.parse(asString));
          expect(other.status, asValue).toBe(422);
          expect(other.body.code, asValue).toBe('key_mismatch');
          expect(retry.status, asString).toBe(201);
          expect(retry.replayed, asString).toBe('true');
          expect(retry.body.got, asString).toBe(JSON.parse(asString));
        }
        expect(runs()).toBe(pairs.length);
      },
    );

    it('Express, express.text() for JSON: the whole text is still read as JSON (key order, whitespace)', async () => {
      const { url, runs } = await startExpress(await create(), express.text({ type: JSON_TYPE }));
      const key = `k-${randomUUID()}`;
      // Act
      const first = await post(url, key, '{"b":1,"a":"x"}', JSON_TYPE);
      const reencoded = await post(
        url,
        key,
        '{ "a": "x", "b": 1 }',
        'application/json; charset=UTF-8',
      );
      const other = await post(url, key, '{"b":2,"a":"x"}', JSON_TYPE);
      // Assert
      expect(first.status).toBe(201);
      expect(reencoded.status).toBe(201);
      expect(reencoded.replayed).toBe('true');
      expect(other.status).toBe(422);
      expect(runs()).toBe(1);
    });

    it('Express with keepRawBody: the same JSON bytes as UTF-7 and as UTF-8 are two requests', async () => {
      const { url, runs } = await startExpress(
        await create(),
        express.json({ verify: keepRawBody }),
      );
      const key = `k-${randomUUID()}`;
      const bytes = '{"a":"+AOk-"}';
      // Act
      const utf7 = await post(url, key, bytes, 'application/json; charset=utf-7');
      const utf8 = await post(url, key, bytes, 'application/json; charset=utf-8');
      const retry = await post(url, key, bytes, 'application/json; charset="UTF-7"');
      // Assert: body-parser read `é` from the first, and `+AOk-` would be the second's
      expect(utf7.body.got).toEqual({ a: 'é' });
      expect(utf8.status).toBe(422);
      expect(utf8.body.code).toBe('key_mismatch');
      expect(retry.replayed).toBe('true');
      expect(runs()).toBe(1);
    });

    it('Express, express.text() after the layer: the same bytes as ISO-8859-1 and KOI8-R are two requests', async () => {
      const { url, runs } = await startExpress(await create(), express.text(), 'layer first');
      const key = `k-${randomUUID()}`;
      const bytes = Buffer.from([0x63, 0x61, 0x66, 0xe9]);
      // Act
      const latin1 = await post(url, key, bytes, 'text/plain; charset=iso-8859-1');
      const koi8 = await post(url, key, bytes, 'text/plain; charset=koi8-r');
      const retry = await post(url, key, bytes, 'text/plain; charset=ISO-8859-1');
      // Assert
      expect(latin1.body.got).toBe('café');
      expect(koi8.status).toBe(422);
      expect(retry.replayed).toBe('true');
      expect(retry.body.got).toBe('café');
      expect(runs()).toBe(1);
    });
  },
);

describe('transactionalRoute (Fastify, SQLite): a JSON string whose text is JSON', () => {
  it('is not the value it spells', async () => {
    // Arrange: Fastify's own JSON parser, no kept text
    const database = new Database(':memory:');
    const app = fastify();
    onTestFinished(async () => {
      await app.close();
      database.close();
    });
    let runs = 0;
    app.post(
      '/orders',
      transactionalRoute(sqliteTransactional({ database }), (request) => {
        runs++;
        return { status: 201, body: { got: request.body } };
      }),
    );
    const url = `${await app.listen({ port: 0, host: '127.0.0.1' })}/orders`;
    // Act
    const first = await post(url, 'k-tx', '"123"', JSON_TYPE);
    const other = await post(url, 'k-tx', '123', JSON_TYPE);
    const retry = await post(url, 'k-tx', '"123"', JSON_TYPE);
    // Assert
    expect(first.body.got).toBe('123');
    expect(other.status).toBe(422);
    expect(retry.replayed).toBe('true');
    expect(runs).toBe(1);
  });
});
