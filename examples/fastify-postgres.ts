/**
 * Fastify + PostgreSQL: the plugin protects every POST/PATCH route; `/orders` requires a key, `/ping`
 * turns the layer off. The same request sent twice runs the handler once; the same key for another
 * customer is a 422, even when the customers are int64 ids that Fastify's parser rounds to one number.
 *
 * Run: `npx tsx examples/fastify-postgres.ts` (DATABASE_URL, default postgres://postgres@127.0.0.1:5432/test;
 * EXAMPLE_SCHEMA, default idempotency_example, dropped at the end).
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
const schema = process.env.EXAMPLE_SCHEMA ?? 'idempotency_example';
// Once per deployment (or `npx idempotency-kit migrate`).
await migrate(pool, { schema });

const app = Fastify();
await app.register(idempotencyPlugin, {
  store: postgresStore({ pool, schema }),
  namespace: 'orders-api',
  // Let API versions be part of the fingerprint: the same key with another version is a 422.
  fingerprintHeaders: ['api-version'],
  // Customer ids are int64: keep the JSON text so the fingerprint reads them exactly.
  keepJsonText: true,
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
// Twice the same order, then the same key for another customer (9223372036854775806 and
// 9223372036854775807 are one double once parsed): 201, 201 replayed, 422.
const customers = ['9223372036854775807', '9223372036854775807', '9223372036854775806'];
for (const customer of customers) {
  const response = await app.inject({
    method: 'POST',
    url: '/orders',
    headers: { 'idempotency-key': key, 'content-type': 'application/json' },
    payload: `{"sku":"book","qty":1,"customer":${customer}}`,
  });
  console.log(response.statusCode, response.headers['idempotent-replayed'] ?? '-', response.body);
}
console.log(`handler ran ${executions} time(s)`);

await app.close();
await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
await pool.end();
