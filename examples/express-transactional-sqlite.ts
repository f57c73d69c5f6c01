/**
 * An Express route whose idempotency record commits in the same SQLite transaction as the order row and
 * the outbox message (`transactionalRoute`): a crash at any point leaves all three or none. The same
 * request twice writes one order and replays the first answer; another body under the key is a 422.
 *
 * Run: `npx tsx examples/express-transactional-sqlite.ts` (writes a temporary database file). In your code,
 * import from `idempotency-kit/express`, `idempotency-kit/sqlite` and `idempotency-kit/outbox`.
 * @module
 */
import { mkdtempSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import express from 'express';
import { transactionalRoute } from '../src/express/index.js';
import { enqueue, migrateOutbox } from '../src/outbox/index.js';
import { sqliteTransactional } from '../src/sqlite/index.js';

const dir = mkdtempSync(join(tmpdir(), 'ik-example-'));
const db = new Database(join(dir, 'shop.db'));
db.pragma('journal_mode = WAL');
db.exec(
  'CREATE TABLE orders (id INTEGER PRIMARY KEY, sku TEXT NOT NULL, quantity INTEGER NOT NULL)',
);
migrateOutbox(db);
const transactional = sqliteTransactional({ database: db });

const app = express();
app.post(
  '/orders',
  express.json(),
  // Synchronous on SQLite: better-sqlite3 cannot keep a transaction open across an `await`.
  transactionalRoute(transactional, (req) => {
    // `db` is the connection the transaction is open on: these writes commit with the record.
    const { sku, quantity } = req.body as { sku: string; quantity: number };
    const { lastInsertRowid } = db
      .prepare('INSERT INTO orders (sku, quantity) VALUES (?, ?)')
      .run(sku, quantity);
    const id = Number(lastInsertRowid);
    enqueue(db, { topic: 'order.placed', key: String(id), payload: { id, sku, quantity } });
    return { status: 201, body: { id, sku, quantity }, headers: { location: `/orders/${id}` } };
  }),
);

const server = app.listen(0, '127.0.0.1');
await new Promise((resolve) => server.once('listening', resolve));
const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/orders`;
const order = (body: object) =>
  fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': 'order-2026-0001' },
    body: JSON.stringify(body),
  });

for (const body of [
  { sku: 'tea', quantity: 2 },
  { sku: 'tea', quantity: 2 },
  { sku: 'tea', quantity: 3 },
]) {
  const answer = await order(body);
  console.log(answer.status, answer.headers.get('idempotent-replayed') ?? '-', await answer.text());
}
const count = (table: string) =>
  (db.prepare(`SELECT count(*) AS n FROM ${table}`).get() as { n: number }).n;
console.log(`orders: ${count('orders')}, outbox messages: ${count('idempotency_outbox')}`);

server.close();
db.close();
rmSync(dir, { recursive: true, force: true });
