/**
 * What the transactional route tests share: an Express app served on a loopback port, posted JSON to, and
 * the rows a handler wrote to the fixture's `payments` table, a SQLite file with an `orders` table.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import type { Express } from 'express';
import type { PostgresFixture } from '../../helpers/postgres-env.js';

/** A served app: `post` sends a JSON body (a string as it is, anything else as its JSON). */
export interface Served {
  post(path: string, body: unknown, headers?: Record<string, string>): Promise<Response>;
  close(): Promise<void>;
}

/** Serve `app` on a free loopback port. */
export async function serve(app: Express): Promise<Served> {
  const server = app.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    post: (path, body, headers = {}) =>
      fetch(`${base}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: typeof body === 'string' ? body : JSON.stringify(body),
      }),
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

/** How many rows of `fx.schema`'s `payments` table have `ref` (the tests' handlers write one per run). */
export async function paymentRows(fx: PostgresFixture, ref: string): Promise<number> {
  const { rows } = await fx.pool.query(
    `SELECT count(*)::int AS n FROM "${fx.schema}".payments WHERE ref = $1`,
    [ref],
  );
  return rows[0].n;
}

/** A SQLite database in a directory of its own, with an `orders (ref)` table; `dispose` deletes it. */
export function sqliteOrders(label: string): { database: Database.Database; dispose(): void } {
  const dir = mkdtempSync(join(tmpdir(), `idempotency-kit-${label}-`));
  const database = new Database(join(dir, `${label}.db`));
  database.exec('CREATE TABLE orders (ref TEXT NOT NULL)');
  return {
    database,
    dispose() {
      database.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
