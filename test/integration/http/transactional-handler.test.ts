/**
 * `transactionalHandler` (fetch) on the real PostgreSQL server and on a SQLite file: the claim, the
 * handler's rows and the stored answer commit in one transaction, with `withIdempotency`'s answers.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { transactionalHandler } from '../../../src/fetch/index.js';
import { postgresTransactional, type TransactionContext } from '../../../src/postgres/index.js';
import { sqliteTransactional } from '../../../src/sqlite/index.js';
import { type PostgresFixture, setupPostgres } from '../../helpers/postgres-env.js';

let fx: PostgresFixture;
const dir = mkdtempSync(join(tmpdir(), 'idempotency-kit-tx-handler-'));
const sqlite = new Database(join(dir, 'handler.db'));

beforeAll(async () => {
  fx = await setupPostgres('txhandler', { max: 8 });
  await fx.pool.query(
    `CREATE TABLE "${fx.schema}".payments (id serial PRIMARY KEY, ref text NOT NULL)`,
  );
  sqlite.exec('CREATE TABLE orders (ref TEXT NOT NULL)');
});

afterAll(async () => {
  await fx?.dispose();
  sqlite.close();
  rmSync(dir, { recursive: true, force: true });
});

const request = (body: unknown, headers: Record<string, string> = {}) =>
  new Request('http://localhost/payments?b=2&a=1', {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });

describe('transactionalHandler on PostgreSQL', () => {
  it('answers once, replays the same bytes, 422 for another body, 400 without a key; one row', async () => {
    // Arrange
    const transactional = postgresTransactional({ pool: fx.pool, schema: fx.schema });
    const POST = transactionalHandler(
      transactional,
      async (_request, tx: TransactionContext, body: { ref: string }) => {
        const { rows } = await tx.query<{ id: number }>(
          `INSERT INTO "${fx.schema}".payments (ref) VALUES ($1) RETURNING id`,
          [body.ref],
        );
        return { status: 201, body: { id: rows[0]?.id } };
      },
    );
    const ref = randomUUID();
    const key = { 'idempotency-key': `f-${ref}` };
    // Act
    const first = await POST(request({ ref }, key));
    const firstBody = await first.text();
    const again = await POST(request({ ref }, key));
    const mismatch = await POST(request({ ref, more: 1 }, key));
    const missing = await POST(request({ ref }));
    // Assert
    expect([first.status, first.headers.get('idempotent-replayed')]).toEqual([201, null]);
    expect([again.status, again.headers.get('idempotent-replayed')]).toEqual([201, 'true']);
    expect(await again.text()).toBe(firstBody);
    expect(mismatch.status).toBe(422);
    expect(((await missing.json()) as { code: string }).code).toBe('missing_key');
    const { rows } = await fx.pool.query(
      `SELECT count(*)::int AS n FROM "${fx.schema}".payments WHERE ref = $1`,
      [ref],
    );
    expect(rows[0].n).toBe(1);
  });
});

describe('transactionalHandler on SQLite', () => {
  it('gives a synchronous handler the parsed body inside the transaction', async () => {
    const POST = transactionalHandler(
      sqliteTransactional({ database: sqlite }),
      (_request, _tx, body: { ref: string }) => {
        sqlite.prepare('INSERT INTO orders (ref) VALUES (?)').run(body.ref);
        return { status: 201, body: { ref: body.ref } };
      },
    );
    const ref = randomUUID();
    const key = { 'idempotency-key': `s-${ref}` };
    const answers = [await POST(request({ ref }, key)), await POST(request({ ref }, key))];
    expect(answers.map((a) => [a.status, a.headers.get('idempotent-replayed')])).toEqual([
      [201, null],
      [201, 'true'],
    ]);
    const { n } = sqlite.prepare('SELECT count(*) AS n FROM orders WHERE ref = ?').get(ref) as {
      n: number;
    };
    expect(n).toBe(1);
  });
});
