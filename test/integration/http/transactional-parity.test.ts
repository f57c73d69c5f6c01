/**
 * The transactional routes (Express `transactionalRoute`, Fastify `transactionalRoute`, fetch
 * `transactionalHandler`) answer a request as the middleware does, on the real PostgreSQL server and on
 * a SQLite file: a 5xx answer rolls everything back and is not stored (unless `storeServerErrors`), the
 * JSON text is fingerprinted (int64 ids), and the middleware's route options mean the same here.
 */
import { randomUUID } from 'node:crypto';
import express, { type NextFunction, type Request, type Response } from 'express';
import Fastify, { type FastifyInstance, type FastifyRequest } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  keepRawBody,
  type TransactionalRouteOptions,
  transactionalRoute,
} from '../../../src/express/index.js';
import { transactionalRoute as fastifyRoute } from '../../../src/fastify/index.js';
import { transactionalHandler } from '../../../src/fetch/index.js';
import { postgresTransactional, type TransactionContext } from '../../../src/postgres/index.js';
import { sqliteTransactional } from '../../../src/sqlite/index.js';
import { type PostgresFixture, setupPostgres } from '../../helpers/postgres-env.js';
import { paymentRows, type Served, serve, sqliteOrders } from './transactional-fixtures.js';

let fx: PostgresFixture;
let served: Served;
let fastify: FastifyInstance;
const orders = sqliteOrders('tx-parity');
const sqlite = orders.database;
/** Handler runs per ref: how many times the handler ran for a request, whatever it answered. */
const runs = new Map<string, number>();
const ran = (ref: string) => runs.set(ref, (runs.get(ref) ?? 0) + 1);

interface Payment {
  ref: string;
  status?: number;
  account?: unknown;
}

// The handler of every PostgreSQL route: writes a row, then answers with the status the body asks for.
async function pay(body: Payment, tx: TransactionContext) {
  ran(body.ref);
  const { rows } = await tx.query<{ id: number }>(
    `INSERT INTO "${fx.schema}".payments (ref) VALUES ($1) RETURNING id`,
    [body.ref],
  );
  const status = body.status ?? 201;
  if (status < 500) return { status, body: { id: rows[0]?.id } };
  const headers: Record<string, string> = body.account === 'bare' ? {} : { 'retry-after': '7' };
  return { status, body: { error: 'gateway down' }, headers };
}

function expressApp(): express.Express {
  const a = express();
  a.use(express.json({ verify: keepRawBody }));
  const transactional = postgresTransactional({ pool: fx.pool, schema: fx.schema });
  const route = (options?: TransactionalRouteOptions) =>
    transactionalRoute(
      transactional,
      (req: Request, tx: TransactionContext) => pay(req.body, tx),
      options,
    );
  a.post('/payments', route());
  a.post('/kept-errors', route({ storeServerErrors: true }));
  a.post('/versioned', route({ fingerprintHeaders: ['api-version'] }));
  a.post('/session', route({ scopeCookies: ['session'] }));
  a.post('/short-lived', route({ retentionMs: 300 }));
  a.post('/custom-key', route({ headerName: 'X-Request-Id', minKeyLength: 8 }));
  a.post('/tenant', route({ scope: async (req) => req.get('x-tenant') }));
  a.post('/small', route({ maxBodyBytes: 8 }));
  const local = sqliteTransactional({ database: sqlite });
  a.post(
    '/local',
    transactionalRoute(local, (req: Request, tx) => {
      ran(req.body.ref);
      tx.database.prepare('INSERT INTO orders (ref) VALUES (?)').run(req.body.ref);
      return {
        status: req.body.status ?? 201,
        body: 'ok',
        headers: { 'content-type': 'text/plain' },
      };
    }),
  );
  a.use((error: Error, _req: Request, res: Response, _next: NextFunction) => {
    res.status(500).json({ error: error.message });
  });
  return a;
}

async function fastifyApp(): Promise<FastifyInstance> {
  const app = Fastify();
  const transactional = postgresTransactional({ pool: fx.pool, schema: fx.schema });
  const route = fastifyRoute(
    transactional,
    (request: FastifyRequest<{ Body: Payment }>, tx: TransactionContext) => pay(request.body, tx),
  );
  app.post('/payments', { preParsing: route.keepJsonText }, route);
  // A body parser of the app's that keeps the text as `request.rawBody`, as fastify-raw-body does.
  await app.register(async (scoped) => {
    scoped.addContentTypeParser(
      'application/json',
      { parseAs: 'string' },
      (request, text, done) => {
        (request as { rawBody?: string }).rawBody = text as string;
        done(null, JSON.parse(text as string));
      },
    );
    scoped.post('/raw', route);
  });
  await app.ready();
  return app;
}

beforeAll(async () => {
  fx = await setupPostgres('txparity', { max: 8 });
  await fx.pool.query(
    `CREATE TABLE "${fx.schema}".payments (id serial PRIMARY KEY, ref text NOT NULL)`,
  );
  served = await serve(expressApp());
  fastify = await fastifyApp();
});

afterAll(async () => {
  await served?.close();
  await fastify?.close();
  await fx?.dispose();
  orders.dispose();
});

const rowsFor = (ref: string) => paymentRows(fx, ref);

const sqliteRowsFor = (ref: string) =>
  (sqlite.prepare('SELECT count(*) AS n FROM orders WHERE ref = ?').get(ref) as { n: number }).n;

/** A 5xx answer sent as the handler returned it, then run again for the retry (nothing was stored). */
async function expectUnstored(
  first: globalThis.Response,
  retry: globalThis.Response,
  expected: [number, string, unknown],
) {
  expect([first.status, first.headers.get('retry-after'), await first.json()]).toEqual(expected);
  expect([retry.status, retry.headers.get('idempotent-replayed')]).toEqual([expected[0], null]);
}

// Two JSON bodies a double cannot tell apart: the accounts differ in the last digit only.
const int64Body = (ref: string, last: number) =>
  `{"ref":"${ref}","account":922337203685477580${last}}`;

describe('a 5xx answer', () => {
  it('Express, PostgreSQL: is sent as returned (Retry-After too), rolled back and not stored; the retry runs again', async () => {
    // Arrange
    const ref = randomUUID();
    const key = { 'idempotency-key': `5-${ref}` };
    // Act
    const first = await served.post('/payments', { ref, status: 502 }, key);
    const retry = await served.post('/payments', { ref, status: 502 }, key);
    // Assert
    await expectUnstored(first, retry, [502, '7', { error: 'gateway down' }]);
    expect(runs.get(ref)).toBe(2);
    expect(await rowsFor(ref)).toBe(0);
  });

  it('Express, PostgreSQL: a success after a 5xx under the same key commits once', async () => {
    const ref = randomUUID();
    const key = { 'idempotency-key': `5s-${ref}` };
    expect((await served.post('/payments', { ref, status: 503 }, key)).status).toBe(503);
    // Another body under the key is not a mismatch: the 5xx left no record.
    expect((await served.post('/payments', { ref }, key)).status).toBe(201);
    const replay = await served.post('/payments', { ref }, key);
    expect([replay.status, replay.headers.get('idempotent-replayed')]).toEqual([201, 'true']);
    expect(await rowsFor(ref)).toBe(1);
  });

  it('Express, PostgreSQL, storeServerErrors: true: is committed with the writes and replayed', async () => {
    const ref = randomUUID();
    const key = { 'idempotency-key': `5k-${ref}` };
    const first = await served.post('/kept-errors', { ref, status: 500, account: 'bare' }, key);
    const retry = await served.post('/kept-errors', { ref, status: 500, account: 'bare' }, key);
    expect([first.status, await first.json()]).toEqual([500, { error: 'gateway down' }]);
    expect([retry.status, retry.headers.get('idempotent-replayed')]).toEqual([500, 'true']);
    expect(runs.get(ref)).toBe(1);
    expect(await rowsFor(ref)).toBe(1);
    // Stored, so it must carry only headers that are replayed, as any stored answer: Retry-After is not.
    const other = randomUUID();
    const refused = await served.post(
      '/kept-errors',
      { ref: other, status: 500 },
      { 'idempotency-key': `5k-${other}` },
    );
    expect(((await refused.json()) as { error: string }).error).toMatch(
      /'retry-after' is not replayed/,
    );
    expect(await rowsFor(other)).toBe(0);
  });

  it('Express, SQLite (synchronous handler): is rolled back and not stored; the retry runs again', async () => {
    const ref = randomUUID();
    const key = { 'idempotency-key': `5l-${ref}` };
    const first = await served.post('/local', { ref, status: 500 }, key);
    const retry = await served.post('/local', { ref, status: 500 }, key);
    expect([first.status, await first.text()]).toEqual([500, 'ok']);
    expect([retry.status, retry.headers.get('idempotent-replayed')]).toEqual([500, null]);
    expect(runs.get(ref)).toBe(2);
    expect(sqliteRowsFor(ref)).toBe(0);
  });

  it('Fastify, PostgreSQL: is rolled back and not stored; the retry runs again', async () => {
    const ref = randomUUID();
    const inject = () =>
      fastify.inject({
        method: 'POST',
        url: '/payments',
        headers: { 'content-type': 'application/json', 'idempotency-key': `5f-${ref}` },
        payload: JSON.stringify({ ref, status: 504 }),
      });
    const [first, retry] = [await inject(), await inject()];
    expect([first.statusCode, first.headers['retry-after'], first.json()]).toEqual([
      504,
      '7',
      { error: 'gateway down' },
    ]);
    expect([retry.statusCode, retry.headers['idempotent-replayed']]).toEqual([504, undefined]);
    expect(await rowsFor(ref)).toBe(0);
  });

  it('fetch, SQLite: is rolled back and not stored; the retry runs again', async () => {
    const POST = transactionalHandler(
      sqliteTransactional({ database: sqlite }),
      (_request, _tx, body: { ref: string }) => {
        ran(body.ref);
        sqlite.prepare('INSERT INTO orders (ref) VALUES (?)').run(body.ref);
        return { status: 503, body: { error: 'later' }, headers: { 'retry-after': '2' } };
      },
    );
    const ref = randomUUID();
    const request = () =>
      new Request('http://localhost/orders', {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': `5h-${ref}` },
        body: JSON.stringify({ ref }),
      });
    const [first, retry] = [await POST(request()), await POST(request())];
    await expectUnstored(first, retry, [503, '2', { error: 'later' }]);
    expect(runs.get(ref)).toBe(2);
    expect(sqliteRowsFor(ref)).toBe(0);
  });
});

describe('the JSON text of the body is fingerprinted (int64 ids a double rounds alike)', () => {
  it('Express with express.json({ verify: keepRawBody }): 422 for the other account', async () => {
    const ref = randomUUID();
    const key = { 'idempotency-key': `j-${ref}` };
    expect((await served.post('/payments', int64Body(ref, 7), key)).status).toBe(201);
    const other = await served.post('/payments', int64Body(ref, 6), key);
    expect(other.status).toBe(422);
    expect(await rowsFor(ref)).toBe(1);
  });

  it('Fastify with the route’s keepJsonText preParsing hook, or a request.rawBody: 422 for the other account', async () => {
    for (const url of ['/payments', '/raw']) {
      const ref = randomUUID();
      const inject = (last: number) =>
        fastify.inject({
          method: 'POST',
          url,
          headers: { 'content-type': 'application/json', 'idempotency-key': `jf-${ref}` },
          payload: int64Body(ref, last),
        });
      expect((await inject(7)).statusCode).toBe(201);
      expect([url, (await inject(6)).statusCode]).toEqual([url, 422]);
      expect(await rowsFor(ref)).toBe(1);
    }
  });

  it('fetch (reads the bytes): 422 for the other account', async () => {
    const POST = transactionalHandler(sqliteTransactional({ database: sqlite }), () => ({
      status: 201,
    }));
    const key = `jh-${randomUUID()}`;
    const request = (last: number) =>
      new Request('http://localhost/orders', {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': key },
        body: int64Body('r', last),
      });
    expect((await POST(request(7))).status).toBe(201);
    expect((await POST(request(6))).status).toBe(422);
  });
});

describe('the middleware’s route options', () => {
  it('fingerprintHeaders: another API version under the key is 422', async () => {
    const ref = randomUUID();
    const key = `v-${ref}`;
    expect(
      (await served.post('/versioned', { ref }, { 'idempotency-key': key, 'api-version': '1' }))
        .status,
    ).toBe(201);
    const other = await served.post(
      '/versioned',
      { ref },
      { 'idempotency-key': key, 'api-version': '2' },
    );
    expect(other.status).toBe(422);
    expect(await rowsFor(ref)).toBe(1);
  });

  it('scopeCookies: a retry whose other cookies changed is the same caller, another session is not', async () => {
    const ref = randomUUID();
    const withCookie = (cookie: string) =>
      served.post('/session', { ref }, { 'idempotency-key': `c-${ref}`, cookie });
    const first = await withCookie('session=a; lb=1');
    const retry = await withCookie('lb=2; session=a');
    const other = await withCookie('session=b');
    expect([first.status, retry.status, retry.headers.get('idempotent-replayed')]).toEqual([
      201,
      201,
      'true',
    ]);
    expect([other.status, other.headers.get('idempotent-replayed')]).toEqual([201, null]);
    expect(await rowsFor(ref)).toBe(2);
  });

  it('retentionMs: the answer is replayed for that long, then the key is free again', async () => {
    const ref = randomUUID();
    const key = { 'idempotency-key': `r-${ref}` };
    expect((await served.post('/short-lived', { ref }, key)).status).toBe(201);
    await new Promise((resolve) => setTimeout(resolve, 600));
    const later = await served.post('/short-lived', { ref }, key);
    expect([later.status, later.headers.get('idempotent-replayed')]).toEqual([201, null]);
    expect(await rowsFor(ref)).toBe(2);
  });

  it('headerName and minKeyLength: the key is read from that header; a short one is 400 and runs nothing', async () => {
    const ref = randomUUID();
    const missing = await served.post('/custom-key', { ref }, { 'idempotency-key': `k-${ref}` });
    const short = await served.post('/custom-key', { ref }, { 'x-request-id': 'abc' });
    const first = await served.post('/custom-key', { ref }, { 'x-request-id': `k-${ref}` });
    const again = await served.post('/custom-key', { ref }, { 'x-request-id': `k-${ref}` });
    expect(missing.status).toBe(400);
    expect(await missing.json()).toMatchObject({
      code: 'missing_key',
      detail: 'This endpoint requires an x-request-id header.',
    });
    expect([short.status, ((await short.json()) as { code: string }).code]).toEqual([
      400,
      'invalid_key',
    ]);
    expect([first.status, again.headers.get('idempotent-replayed')]).toEqual([201, 'true']);
    expect(runs.get(ref)).toBe(1);
  });

  it('an async scope: its tenant keeps callers apart; resolving to undefined falls back to the credentials', async () => {
    const ref = randomUUID();
    const as = (headers: Record<string, string>) =>
      served.post('/tenant', { ref }, { 'idempotency-key': `t-${ref}`, ...headers });
    const a = await as({ 'x-tenant': 'a' });
    const a2 = await as({ 'x-tenant': 'a' });
    const b = await as({ 'x-tenant': 'b' });
    // No tenant: the digest of the credentials, so two users without a tenant never share a record.
    const alice = await as({ authorization: 'Bearer alice' });
    const bob = await as({ authorization: 'Bearer bob' });
    expect([a.status, a2.headers.get('idempotent-replayed')]).toEqual([201, 'true']);
    expect([b.status, b.headers.get('idempotent-replayed')]).toEqual([201, null]);
    expect([alice.status, bob.status, bob.headers.get('idempotent-replayed')]).toEqual([
      201,
      201,
      null,
    ]);
    expect(await rowsFor(ref)).toBe(4);
  });

  it('maxBodyBytes: an answer over it is refused before COMMIT, so nothing happens and nothing is stored', async () => {
    const ref = randomUUID();
    const key = { 'idempotency-key': `b-${ref}` };
    const first = await served.post('/small', { ref }, key);
    expect(first.status).toBe(500);
    expect(((await first.json()) as { error: string }).error).toMatch(/maxBodyBytes/);
    expect(await rowsFor(ref)).toBe(0);
    expect((await served.post('/small', { ref }, key)).status).toBe(500);
    expect(runs.get(ref)).toBe(2);
  });
});
