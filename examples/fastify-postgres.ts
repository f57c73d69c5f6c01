/**
 * Fastify + PostgreSQL: the plugin protects every POST/PATCH route; `/orders` requires a key, `/ping`
 * turns the layer off. The same request sent twice runs the handler once.
 *
 * Run: `npx tsx examples/fastify-postgres.ts` (DATABASE_URL, default postgres://postgres@127.0.0.1:5432/test).
 * @module
 */
import { randomUUID } from 'node:crypto';
import Fastify from 'fastify';
import pg from 'pg';
import { idempotencyPlugin } from '../src/fastify/index.js';
import { migrate, postgresStore } from '../src/postgres/index.js';

const pool = new pg.Pool({
  connectionString: process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test',
});
const schema = 'idempotency_example';
// Once per deployment (or `npx idempotency-kit migrate`).
await migrate(pool, { schema });

const app = Fastify();
await app.register(idempotencyPlugin, {
  store: postgresStore({ pool, schema }),
  namespace: 'orders-api',
  // Let API versions be part of the fingerprint: the same key with another version is a 422.
  fingerprintHeaders: ['api-version'],
});

let executions = 0;
app.post('/orders', { config: { idempotency: { key: 'required' } } }, async (request, reply) => {
  executions++;
  const ctx = request.idempotency;
  return reply
    .code(201)
    .send({ id: `ord_${executions}`, attempt: ctx?.attempt, body: request.body });
});
app.post('/ping', { config: { idempotency: false } }, async () => ({ ok: true }));

const key = randomUUID();
for (let i = 0; i < 2; i++) {
  const response = await app.inject({
    method: 'POST',
    url: '/orders',
    headers: { 'idempotency-key': key },
    payload: { sku: 'book', qty: 1 },
  });
  console.log(response.statusCode, response.headers['idempotent-replayed'] ?? '-', response.body);
}
console.log(`handler ran ${executions} time(s)`);

await app.close();
await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
await pool.end();
