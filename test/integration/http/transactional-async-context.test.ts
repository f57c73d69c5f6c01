/**
 * `currentIdempotency()` in the handler of a transactional route created with `asyncContext: true`
 * (Express, Fastify, fetch; the real PostgreSQL server and a SQLite file): a helper written for the
 * middleware (`publishWithKey()`) gets the request's key, scope and claim, with a `downstreamKey(step)`
 * equal to `tx.downstreamKey(step)`. Before, it threw (no adapter had `asyncContext`) or gave `undefined`
 * (one had), and the routes refused the option. The context belongs to its own request only: concurrent
 * requests each see theirs, work the handler leaves running sees its request's, and nothing else that
 * runs after the handler (the answer being sent) sees one.
 */
import { randomUUID } from 'node:crypto';
import express, { type Request } from 'express';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { currentIdempotency, transactionalRoute } from '../../../src/express/index.js';
import { transactionalRoute as fastifyRoute } from '../../../src/fastify/index.js';
import { transactionalHandler } from '../../../src/fetch/index.js';
import { postgresTransactional, type TransactionContext } from '../../../src/postgres/index.js';
import { type SqliteTransactionContext, sqliteTransactional } from '../../../src/sqlite/index.js';
import { type PostgresFixture, setupPostgres } from '../../helpers/postgres-env.js';
import { type Served, serve, sqliteOrders } from './transactional-fixtures.js';

let fx: PostgresFixture;
let served: Served;
let fastify: FastifyInstance;
let fetchRoute: (request: globalThis.Request) => Promise<globalThis.Response>;
const orders = sqliteOrders('txctx');
/** What `currentIdempotency()` gave once each answer had been sent (`res.on('finish')`). */
const atFinish: unknown[] = [];
/** What work the handler left running saw, by the request's `ref`, once the handler had returned. */
const late = new Map<string, string | undefined>();

/** A helper of the application's, written for the middleware: what it would stamp on a message. */
function publishWithKey() {
  const ctx = currentIdempotency();
  if (ctx === undefined) return undefined;
  const { key, scope, storageKey, token, attempt } = ctx;
  return { key, scope, storageKey, token, attempt, messageId: ctx.downstreamKey('order.created') };
}

/** The same facts as the transactional mode hands them to the handler. */
function claimOf(tx: TransactionContext | SqliteTransactionContext) {
  const { storageKey, token, attempt } = tx;
  return { storageKey, token, attempt, messageId: tx.downstreamKey('order.created') };
}

// Writes a row between two reads of the context, after a pause that lets concurrent requests run.
async function pgHandler(ref: string, pause: number, tx: TransactionContext) {
  const before = publishWithKey();
  await tx.query('SELECT pg_sleep($1)', [pause]);
  await tx.query(`INSERT INTO "${fx.schema}".payments (ref) VALUES ($1)`, [ref]);
  const after = publishWithKey();
  // The lease fields have nothing to watch in a transaction, and a step runs unrecorded.
  const ctx = currentIdempotency();
  const lease = ctx && {
    aborted: ctx.signal.aborted,
    extended: await ctx.extendLease('1m'),
    step: await ctx.step('charge', (step) => step),
    stepKey: tx.downstreamKey('charge'),
  };
  // Work the handler starts and leaves running (a publish) belongs to its request.
  setTimeout(() => late.set(ref, currentIdempotency()?.key), 20);
  return { status: 201, body: { before, after, tx: claimOf(tx), lease } };
}

function expressApp(): express.Express {
  const app = express();
  app.use((_req, res, next) => {
    res.on('finish', () => atFinish.push(currentIdempotency()));
    next();
  });
  app.use(express.json());
  const pg = postgresTransactional({ pool: fx.pool, schema: fx.schema });
  const handler = (req: Request, tx: TransactionContext) =>
    pgHandler(req.body.ref, req.body.pause ?? 0, tx);
  app.post(
    '/pg',
    transactionalRoute(pg, handler, { asyncContext: true, scope: (req) => req.get('x-tenant') }),
  );
  // A route that did not opt in: the context of the other routes' requests must not reach it.
  app.post('/pg-off', transactionalRoute(pg, handler));
  const sqlite = sqliteTransactional({ database: orders.database });
  app.post(
    '/sqlite',
    transactionalRoute(
      sqlite,
      (req: Request, tx) => {
        tx.database.prepare('INSERT INTO orders (ref) VALUES (?)').run(req.body.ref);
        return { status: 201, body: { seen: publishWithKey(), tx: claimOf(tx) } };
      },
      { asyncContext: true },
    ),
  );
  return app;
}

beforeAll(async () => {
  fx = await setupPostgres('txctx', { max: 10 });
  await fx.pool.query(`CREATE TABLE "${fx.schema}".payments (ref text NOT NULL)`);
  served = await serve(expressApp());
  fastify = Fastify();
  const pg = postgresTransactional({ pool: fx.pool, schema: fx.schema });
  fastify.post(
    '/pg',
    fastifyRoute(pg, (_request, tx: TransactionContext) => pgHandler(randomUUID(), 0, tx), {
      asyncContext: true,
    }),
  );
  await fastify.ready();
  fetchRoute = transactionalHandler(
    sqliteTransactional({ database: orders.database }),
    (_request, tx) => ({ status: 201, body: { seen: publishWithKey(), tx: claimOf(tx) } }),
    { asyncContext: true },
  );
});

afterAll(async () => {
  await served?.close();
  await fastify?.close();
  await fx?.dispose();
  orders.dispose();
});

/** What the test handlers answer (JSON: `undefined` fields are left out). */
interface Answer {
  before?: Record<string, unknown>;
  after?: Record<string, unknown>;
  seen?: Record<string, unknown>;
  tx: Record<string, unknown>;
  lease?: { aborted: boolean; step: unknown; stepKey: string };
}
const answerOf = (res: { json(): unknown }) => res.json() as Promise<Answer>;

const post = (path: string, key: string, body: object, headers: Record<string, string> = {}) =>
  served.post(path, body, { 'idempotency-key': key, ...headers });

describe('currentIdempotency() in a transactional route with asyncContext: true', () => {
  it('gives the key, the scope and the claim on PostgreSQL (Express), with tx.downstreamKey', async () => {
    const key = `txctx-${randomUUID()}`;
    const res = await post('/pg', key, { ref: key }, { 'x-tenant': 'tenant-a' });
    expect(res.status).toBe(201);
    const { before, after, tx, lease } = await answerOf(res);
    expect(before).toEqual({ key, scope: 'tenant-a', ...tx });
    expect(after).toEqual(before);
    expect(tx.attempt).toBe(1);
    expect(lease).toEqual({
      aborted: false,
      step: { downstreamKey: lease?.stepKey, attempt: 1 },
      stepKey: expect.stringMatching(/^ik_/),
    });
  });

  it('gives it on a SQLite file (Express and fetch), to a synchronous handler', async () => {
    const key = `txctx-${randomUUID()}`;
    const res = await post('/sqlite', key, { ref: key });
    expect(res.status).toBe(201);
    const { seen, tx } = await answerOf(res);
    // No scope function and no credentials: the middleware's scope, the empty digest.
    expect(seen).toEqual({ key, scope: '', ...tx });

    const other = `txctx-${randomUUID()}`;
    const fetched = await fetchRoute(
      new Request('http://localhost/orders', {
        method: 'POST',
        headers: { 'idempotency-key': other, 'content-type': 'application/json' },
        body: '{}',
      }),
    );
    expect(fetched.status).toBe(201);
    const answer = await answerOf(fetched);
    expect(answer.seen).toEqual({ key: other, scope: '', ...answer.tx });
  });

  it('gives it on PostgreSQL (Fastify)', async () => {
    const key = `txctx-${randomUUID()}`;
    const res = await fastify.inject({
      method: 'POST',
      url: '/pg',
      headers: { 'idempotency-key': key, authorization: 'Bearer txctx' },
      payload: {},
    });
    expect(res.statusCode).toBe(201);
    const { before, after, tx } = await answerOf(res);
    expect(before).toEqual({ key, scope: expect.any(String), ...tx });
    expect(before?.scope).not.toBe('');
    expect(after).toEqual(before);
  });

  it('keeps each of concurrent requests to its own context, and none outside the handler', async () => {
    atFinish.length = 0;
    const keys = Array.from({ length: 6 }, (_, i) => `txctx-${i}-${randomUUID()}`);
    // Pauses in reverse order of start, so that the handlers' reads interleave.
    const answers = await Promise.all([
      ...keys.map((key, i) =>
        post('/pg', key, { ref: key, pause: 0.05 * (keys.length - i) }, { 'x-tenant': key }),
      ),
      post('/pg-off', `txctx-off-${randomUUID()}`, { ref: 'off', pause: 0.1 }),
    ]);
    const bodies = await Promise.all(answers.map(answerOf));
    keys.forEach((key, i) => {
      expect(bodies[i]?.before).toEqual({ key, scope: key, ...bodies[i]?.tx });
      expect(bodies[i]?.after).toEqual(bodies[i]?.before);
    });
    await vi.waitFor(() => expect([...keys, 'off'].filter((ref) => !late.has(ref))).toEqual([]));
    expect([...keys, 'off'].map((ref) => late.get(ref))).toEqual([...keys, undefined]);
    const off = bodies[keys.length];
    expect([off?.before, off?.after, off?.lease]).toEqual([undefined, undefined, undefined]);
    // 'finish' may come a moment after the client has read the answer.
    await vi.waitFor(() => expect(atFinish).toHaveLength(keys.length + 1));
    expect(atFinish).toEqual(Array(keys.length + 1).fill(undefined));
  });
});
