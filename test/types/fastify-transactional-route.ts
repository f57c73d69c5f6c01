/**
 * The `transactionalRoute` example of docs/adapters/fastify.md, type-checked by `tsc --noEmit -p
 * tsconfig.json` under `strict` (never run): `test/unit/http/doc-snippets.test.ts` checks that the doc's
 * code block is the one between the markers below. `request.body` is `unknown` unless the handler names
 * the route's request type, which types `request.body` (the `Req` parameter of `transactionalRoute`).
 */
import fastify, { type FastifyRequest } from 'fastify';
import { transactionalRoute } from '../../src/fastify/index.js';
import type { PgPool } from '../../src/postgres/client.js';
import { postgresTransactional } from '../../src/postgres/index.js';

declare const pool: PgPool;
const app = fastify();
const transactional = postgresTransactional({ pool });

// doc: fastify transactionalRoute
type CreatePayment = FastifyRequest<{ Body: { amount: number } }>;
const route = transactionalRoute(transactional, async (request: CreatePayment, tx) => {
  const { rows } = await tx.query('INSERT INTO payments (amount) VALUES ($1) RETURNING id', [
    request.body.amount,
  ]);
  return { status: 201, body: rows[0] };
});
app.post('/payments', { config: { idempotency: false }, preParsing: route.keepJsonText }, route);
// end doc

// Without the request type, the body is `unknown`: the example as it was did not compile.
transactionalRoute(transactional, async (request, tx) => {
  // @ts-expect-error request.body is unknown
  await tx.query('SELECT $1', [request.body.amount]);
  return { status: 204 };
});
