/**
 * Express `transactionalRoute(...).requireKey`: mounted before the body parser and the app's own checks
 * of the body, it answers a missing or malformed key before the body is read, with the route's
 * `headerName` and `minKeyLength`; a body the app refuses after it stores nothing, so the corrected
 * request may reuse its key. On a SQLite file (synchronous handler).
 */
import { randomUUID } from 'node:crypto';
import express, { type NextFunction, type Request, type Response } from 'express';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { transactionalRoute } from '../../../src/express/index.js';
import { sqliteTransactional } from '../../../src/sqlite/index.js';
import { type Served, serve, sqliteOrders } from './transactional-fixtures.js';

const orders = sqliteOrders('tx-require-key');
const sqlite = orders.database;
let served: Served;
/** Requests the app's body check saw. */
let checked = 0;

// The app's own check of the body: 400 of its own, before any claim.
function validOrder(req: Request, res: Response, next: NextFunction): void {
  checked++;
  if (typeof req.body?.ref === 'string') next();
  else res.status(400).json({ code: 'invalid_order' });
}

beforeAll(async () => {
  const transactional = sqliteTransactional({ database: sqlite });
  const insert = sqlite.prepare('INSERT INTO orders (ref) VALUES (?)');
  const route = transactionalRoute(
    transactional,
    (req) => {
      insert.run(req.body.ref);
      return { status: 201, body: { ref: req.body.ref } };
    },
    { headerName: 'x-order-key', minKeyLength: 8 },
  );
  const app = express();
  app.post('/orders', route.requireKey, express.json(), validOrder, route);
  served = await serve(app);
});

afterAll(async () => {
  await served?.close();
  orders.dispose();
});

const rowsFor = (ref: string) =>
  (sqlite.prepare('SELECT count(*) AS n FROM orders WHERE ref = ?').get(ref) as { n: number }).n;

describe('transactionalRoute(...).requireKey', () => {
  it('answers a missing key before the body parser reads a malformed body', async () => {
    const before = checked;
    const response = await served.post('/orders', '{not json');
    expect(response.status).toBe(400);
    expect(response.headers.get('content-type')).toContain('application/problem+json');
    expect(await response.json()).toMatchObject({
      code: 'missing_key',
      detail: 'This endpoint requires an x-order-key header.',
    });
    expect(checked).toBe(before);
  });

  it('answers a key shorter than minKeyLength before the app checks the body', async () => {
    const before = checked;
    const response = await served.post('/orders', { nope: true }, { 'x-order-key': 'short' });
    expect([response.status, ((await response.json()) as { code: string }).code]).toEqual([
      400,
      'invalid_key',
    ]);
    expect(checked).toBe(before);
  });

  it('passes a good key on: a refused body stores nothing, and the corrected one may reuse the key', async () => {
    const ref = randomUUID();
    const key = { 'x-order-key': `order-${ref}` };
    const refused = await served.post('/orders', { nope: true }, key);
    const first = await served.post('/orders', { ref }, key);
    const again = await served.post('/orders', { ref }, key);
    expect([refused.status, ((await refused.json()) as { code: string }).code]).toEqual([
      400,
      'invalid_order',
    ]);
    expect([first.status, first.headers.get('idempotent-replayed')]).toEqual([201, null]);
    expect([again.status, again.headers.get('idempotent-replayed')]).toEqual([201, 'true']);
    expect(rowsFor(ref)).toBe(1);
  });
});
