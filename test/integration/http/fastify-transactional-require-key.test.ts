/**
 * Fastify `transactionalRoute(...).requireKey`: given as the route's `onRequest` hook, it answers a
 * missing or malformed key before the body is parsed, with the route's `headerName` and `minKeyLength`;
 * a body the app refuses after it (in `preValidation`) stores nothing, so the corrected request may reuse
 * its key. On a SQLite file (synchronous handler).
 */
import { randomUUID } from 'node:crypto';
import Fastify, {
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  type HookHandlerDoneFunction,
} from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { transactionalRoute } from '../../../src/fastify/index.js';
import { sqliteTransactional } from '../../../src/sqlite/index.js';
import { sqliteOrders } from './transactional-fixtures.js';

const orders = sqliteOrders('fastify-tx-require-key');
const sqlite = orders.database;
let app: FastifyInstance;
/** Requests the app's body check saw. */
let checked = 0;

type CreateOrder = FastifyRequest<{ Body: { ref?: unknown } }>;

// The app's own check of the body: 400 of its own, before any claim.
function validOrder(request: CreateOrder, reply: FastifyReply, done: HookHandlerDoneFunction) {
  checked++;
  if (typeof request.body?.ref === 'string') done();
  else reply.code(400).send({ code: 'invalid_order' });
}

beforeAll(async () => {
  const transactional = sqliteTransactional({ database: sqlite });
  const insert = sqlite.prepare('INSERT INTO orders (ref) VALUES (?)');
  const route = transactionalRoute(
    transactional,
    (request: CreateOrder) => {
      insert.run(request.body.ref);
      return { status: 201, body: { ref: request.body.ref } };
    },
    { headerName: 'x-order-key', minKeyLength: 8 },
  );
  app = Fastify();
  app.post('/orders', { onRequest: route.requireKey, preValidation: validOrder }, route);
  await app.ready();
});

afterAll(async () => {
  await app?.close();
  orders.dispose();
});

const post = (payload: unknown, headers: Record<string, string> = {}) =>
  app.inject({
    method: 'POST',
    url: '/orders',
    headers: { 'content-type': 'application/json', ...headers },
    payload: typeof payload === 'string' ? payload : JSON.stringify(payload),
  });

const rowsFor = (ref: string) =>
  (sqlite.prepare('SELECT count(*) AS n FROM orders WHERE ref = ?').get(ref) as { n: number }).n;

describe('Fastify transactionalRoute(...).requireKey', () => {
  it('answers a missing key before Fastify parses a malformed body', async () => {
    const before = checked;
    const response = await post('{not json');
    expect(response.statusCode).toBe(400);
    expect(response.headers['content-type']).toContain('application/problem+json');
    expect(response.json()).toMatchObject({
      code: 'missing_key',
      detail: 'This endpoint requires an x-order-key header.',
    });
    expect(checked).toBe(before);
  });

  it('answers a key shorter than minKeyLength before the app checks the body', async () => {
    const before = checked;
    const response = await post({ nope: true }, { 'x-order-key': 'short' });
    expect([response.statusCode, response.json().code]).toEqual([400, 'invalid_key']);
    expect(checked).toBe(before);
  });

  it('passes a good key on: a refused body stores nothing, and the corrected one may reuse the key', async () => {
    const ref = randomUUID();
    const key = { 'x-order-key': `order-${ref}` };
    const refused = await post({ nope: true }, key);
    const first = await post({ ref }, key);
    const again = await post({ ref }, key);
    expect([refused.statusCode, refused.json().code]).toEqual([400, 'invalid_order']);
    expect([first.statusCode, first.headers['idempotent-replayed']]).toEqual([201, undefined]);
    expect([again.statusCode, again.headers['idempotent-replayed']]).toEqual([201, 'true']);
    expect(again.body).toBe(first.body);
    expect(rowsFor(ref)).toBe(1);
  });
});
