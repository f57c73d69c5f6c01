/**
 * `transactionalRoute` (Express) on the real PostgreSQL server and on a SQLite file: the claim, the
 * handler's rows and the stored answer commit in one transaction, and the answers are the middleware's.
 */
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import express, { type NextFunction, type Request, type Response } from 'express';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { transactionalRoute } from '../../../src/express/index.js';
import { postgresTransactional, type TransactionContext } from '../../../src/postgres/index.js';
import { sqliteTransactional } from '../../../src/sqlite/index.js';
import { type PostgresFixture, setupPostgres } from '../../helpers/postgres-env.js';
import { paymentRows, type Served, serve, sqliteOrders } from './transactional-fixtures.js';

let fx: PostgresFixture;
let served: Served;
const orders = sqliteOrders('tx-route');
const sqlite = orders.database;
let runs = 0;

function app(): express.Express {
  const a = express();
  a.use(express.json());
  const transactional = postgresTransactional({ pool: fx.pool, schema: fx.schema });
  a.post(
    '/payments',
    transactionalRoute(transactional, async (req: Request, tx: TransactionContext) => {
      runs++;
      if (req.body.amount === 13) throw new Error('declined by the gateway');
      const { rows } = await tx.query<{ id: number }>(
        `INSERT INTO "${fx.schema}".payments (ref, amount) VALUES ($1, $2) RETURNING id`,
        [req.body.ref, req.body.amount],
      );
      await new Promise((resolve) => setTimeout(resolve, req.body.slowMs ?? 0));
      const id = rows[0]?.id;
      if (req.body.amount === 7) return { status: 201, body: { id }, headers: { 'x-debug': '1' } };
      return { status: 201, body: { id }, headers: { location: `/payments/${id}` } };
    }),
  );
  const down = postgresTransactional({
    pool: new pg.Pool({
      connectionString: 'postgres://127.0.0.1:9/none',
      connectionTimeoutMillis: 500,
    }),
  });
  a.post(
    '/down',
    transactionalRoute(down, () => ({ status: 201 })),
  );
  const local = sqliteTransactional({ database: sqlite });
  a.post(
    '/local',
    transactionalRoute(local, (req: Request, tx) => {
      tx.database.prepare('INSERT INTO orders (ref) VALUES (?)').run(req.body.ref);
      return { status: 201, body: 'created', headers: { 'content-type': 'text/plain' } };
    }),
  );
  a.post(
    '/local-async',
    // @ts-expect-error an async handler on SQLite does not type-check; this checks the refusal at run time
    transactionalRoute(local, async () => ({ status: 201 })),
  );
  a.use((error: Error, _req: Request, res: Response, _next: NextFunction) => {
    res.status(500).json({ error: error.message });
  });
  return a;
}

beforeAll(async () => {
  fx = await setupPostgres('txroute', { max: 8 });
  await fx.pool.query(
    `CREATE TABLE "${fx.schema}".payments (id serial PRIMARY KEY, ref text NOT NULL, amount int NOT NULL)`,
  );
  served = await serve(app());
});

afterAll(async () => {
  await served?.close();
  await fx?.dispose();
  orders.dispose();
});

const post = (path: string, body: unknown, headers?: Record<string, string>) =>
  served.post(path, body, headers);

const paymentsFor = (ref: string) => paymentRows(fx, ref);

describe('transactionalRoute on PostgreSQL', () => {
  it('answers 201 once and replays the same bytes with Idempotent-Replayed; one row', async () => {
    const ref = randomUUID();
    const key = { 'idempotency-key': `k-${ref}` };
    const first = await post('/payments', { ref, amount: 10 }, key);
    const firstBody = await first.text();
    const again = await post('/payments', { ref, amount: 10 }, key);
    expect(first.status).toBe(201);
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    expect(first.headers.get('location')).toMatch(/^\/payments\/\d+$/);
    expect(again.status).toBe(201);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.headers.get('location')).toBe(first.headers.get('location'));
    expect(await again.text()).toBe(firstBody);
    expect(await paymentsFor(ref)).toBe(1);
  });

  it('writes one row for 20 concurrent duplicates', async () => {
    const ref = randomUUID();
    const key = { 'idempotency-key': `c-${ref}` };
    const answers = await Promise.all(
      Array.from({ length: 20 }, () => post('/payments', { ref, amount: 10, slowMs: 100 }, key)),
    );
    const statuses = answers.map((a) => a.status);
    expect(statuses.every((s) => s === 201 || s === 409)).toBe(true);
    expect(statuses.filter((s) => s === 201).length).toBeGreaterThanOrEqual(1);
    expect(await paymentsFor(ref)).toBe(1);
  });

  it('answers 422 key_mismatch to another body under the key, and 400 to a missing or invalid key', async () => {
    const ref = randomUUID();
    const key = { 'idempotency-key': `m-${ref}` };
    expect((await post('/payments', { ref, amount: 10 }, key)).status).toBe(201);
    const mismatch = await post('/payments', { ref, amount: 11 }, key);
    expect(mismatch.status).toBe(422);
    expect(mismatch.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(((await mismatch.json()) as { code: string }).code).toBe('key_mismatch');
    const missing = await post('/payments', { ref, amount: 10 });
    expect([missing.status, ((await missing.json()) as { code: string }).code]).toEqual([
      400,
      'missing_key',
    ]);
    const invalid = await post(
      '/payments',
      { ref, amount: 10 },
      { 'idempotency-key': 'x'.repeat(256) },
    );
    expect(invalid.status).toBe(400);
    expect(await paymentsFor(ref)).toBe(1);
  });

  it('keeps two callers with the same key apart', async () => {
    const ref = randomUUID();
    const alice = { 'idempotency-key': `u-${ref}`, authorization: 'Bearer alice' };
    const bob = { 'idempotency-key': `u-${ref}`, authorization: 'Bearer bob' };
    expect((await post('/payments', { ref, amount: 10 }, alice)).status).toBe(201);
    const bobs = await post('/payments', { ref, amount: 10 }, bob);
    expect(bobs.status).toBe(201);
    expect(bobs.headers.get('idempotent-replayed')).toBeNull();
    expect(await paymentsFor(ref)).toBe(2);
  });

  it('rolls back and stores nothing when the handler throws: the retry runs again', async () => {
    const ref = randomUUID();
    const key = { 'idempotency-key': `t-${ref}` };
    const before = runs;
    const failed = await post('/payments', { ref, amount: 13 }, key);
    const retried = await post('/payments', { ref, amount: 13 }, key);
    expect([failed.status, retried.status]).toEqual([500, 500]);
    expect(runs - before).toBe(2);
    expect(await paymentsFor(ref)).toBe(0);
  });

  it('refuses, and rolls back, a header the handler returns that would not be replayed', async () => {
    const ref = randomUUID();
    const answer = await post('/payments', { ref, amount: 7 }, { 'idempotency-key': `h-${ref}` });
    expect(answer.status).toBe(500);
    expect(((await answer.json()) as { error: string }).error).toMatch(/'x-debug' is not replayed/);
    expect(await paymentsFor(ref)).toBe(0);
  });

  it('answers 503 store_unavailable with Retry-After when the database cannot be reached', async () => {
    const answer = await post('/down', {}, { 'idempotency-key': 'down-1' });
    expect(answer.status).toBe(503);
    expect(answer.headers.get('retry-after')).not.toBeNull();
    expect(((await answer.json()) as { code: string }).code).toBe('store_unavailable');
  });
});

describe('transactionalRoute on SQLite', () => {
  it('runs a synchronous handler in the transaction and replays its text answer', async () => {
    const ref = randomUUID();
    const key = { 'idempotency-key': `s-${ref}` };
    const first = await post('/local', { ref }, key);
    const again = await post('/local', { ref }, key);
    expect([first.status, await first.text()]).toEqual([201, 'created']);
    expect([again.status, again.headers.get('idempotent-replayed'), await again.text()]).toEqual([
      201,
      'true',
      'created',
    ]);
    expect(again.headers.get('content-type')).toBe('text/plain');
    const { n } = sqlite.prepare('SELECT count(*) AS n FROM orders WHERE ref = ?').get(ref) as {
      n: number;
    };
    expect(n).toBe(1);
  });

  it('refuses an asynchronous handler (better-sqlite3 cannot keep a transaction across an await)', async () => {
    const answer = await post('/local-async', {}, { 'idempotency-key': `a-${randomUUID()}` });
    expect(answer.status).toBe(500);
  });
});

describe('examples/express-transactional-sqlite.ts', () => {
  it('runs: one order and one outbox message for the same request twice, then a 422', async () => {
    const example = fileURLToPath(
      new URL('../../../examples/express-transactional-sqlite.ts', import.meta.url),
    );
    const output = await new Promise<string>((resolve, reject) => {
      execFile(
        process.execPath,
        ['--import', 'tsx', example],
        { timeout: 60_000 },
        (error, stdout) => (error === null ? resolve(stdout) : reject(error)),
      );
    });
    expect(output.split('\n').map((line) => line.split(' ').slice(0, 2).join(' '))).toEqual([
      '201 -',
      '201 true',
      '422 -',
      'orders: 1,',
      '',
    ]);
    expect(output).toContain('orders: 1, outbox messages: 1');
  });
});
