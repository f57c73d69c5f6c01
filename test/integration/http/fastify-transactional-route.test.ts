/**
 * Fastify's `transactionalRoute` on the real PostgreSQL server, beside the plugin registered for the whole
 * instance: the record, the row and the stored answer commit together, with the plugin's answers.
 */
import { randomUUID } from 'node:crypto';
import Fastify, { type FastifyInstance, type FastifyRequest } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idempotencyPlugin, transactionalRoute } from '../../../src/fastify/index.js';
import { memoryStore } from '../../../src/index.js';
import { postgresTransactional, type TransactionContext } from '../../../src/postgres/index.js';
import { type PostgresFixture, setupPostgres } from '../../helpers/postgres-env.js';

let fx: PostgresFixture;
let app: FastifyInstance;

beforeAll(async () => {
  fx = await setupPostgres('fastifytx', { max: 8 });
  await fx.pool.query(
    `CREATE TABLE "${fx.schema}".payments (id serial PRIMARY KEY, ref text NOT NULL)`,
  );
  const transactional = postgresTransactional({ pool: fx.pool, schema: fx.schema });
  app = Fastify();
  await app.register(idempotencyPlugin, { store: memoryStore() });
  app.post(
    '/payments',
    { config: { idempotency: false } },
    transactionalRoute(
      transactional,
      async (request: FastifyRequest<{ Body: { ref: string } }>, tx: TransactionContext) => {
        const { rows } = await tx.query<{ id: number }>(
          `INSERT INTO "${fx.schema}".payments (ref) VALUES ($1) RETURNING id`,
          [request.body.ref],
        );
        return {
          status: 201,
          body: { id: rows[0]?.id },
          headers: { location: `/p/${rows[0]?.id}` },
        };
      },
    ),
  );
  await app.ready();
});

afterAll(async () => {
  await app?.close();
  await fx?.dispose();
});

const post = (body: unknown, headers: Record<string, string> = {}) =>
  app.inject({
    method: 'POST',
    url: '/payments',
    headers: { 'content-type': 'application/json', ...headers },
    payload: JSON.stringify(body),
  });

describe('transactionalRoute on Fastify', () => {
  it('answers once and replays the same bytes; 422 for another body; 400 without a key; one row', async () => {
    const ref = randomUUID();
    const key = { 'idempotency-key': `fy-${ref}` };
    const first = await post({ ref }, key);
    const again = await post({ ref }, key);
    const mismatch = await post({ ref, more: 1 }, key);
    const missing = await post({ ref });
    expect([first.statusCode, first.headers['idempotent-replayed']]).toEqual([201, undefined]);
    expect(first.headers.location).toMatch(/^\/p\/\d+$/);
    expect([again.statusCode, again.headers['idempotent-replayed']]).toEqual([201, 'true']);
    expect(again.body).toBe(first.body);
    expect(again.headers['content-type']).toBe(first.headers['content-type']);
    expect([mismatch.statusCode, missing.statusCode]).toEqual([422, 400]);
    const { rows } = await fx.pool.query(
      `SELECT count(*)::int AS n FROM "${fx.schema}".payments WHERE ref = $1`,
      [ref],
    );
    expect(rows[0].n).toBe(1);
  });

  it('writes one row for 20 concurrent duplicates', async () => {
    const ref = randomUUID();
    const key = { 'idempotency-key': `fc-${ref}` };
    const answers = await Promise.all(Array.from({ length: 20 }, () => post({ ref }, key)));
    expect(answers.every((a) => a.statusCode === 201 || a.statusCode === 409)).toBe(true);
    const { rows } = await fx.pool.query(
      `SELECT count(*)::int AS n FROM "${fx.schema}".payments WHERE ref = $1`,
      [ref],
    );
    expect(rows[0].n).toBe(1);
  });
});
