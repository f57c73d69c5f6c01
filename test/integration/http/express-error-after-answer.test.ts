/**
 * `res.json` (and `res.send`, `res.jsonp`) serializes before it sends: a BigInt, a circular
 * object or a `toJSON` that throws makes it throw out of the handler after the handler did its work (the
 * charge). Express hands that error to its error handler, whose 500 released the key like a thrown
 * error's, and the retry charged a second time. The key is now judged by the answer the handler gave: one
 * that would have been stored (a 201) keeps a `response_not_captured` marker, so every retry is answered
 * 409 and never run again; a 5xx answer releases the key as it would have. The same for a `writeHead`
 * listener that throws on the handler's head (a session middleware that cannot serialize the session):
 * before, the error's reply waited behind the handler's `end`, which never went out, so the client got
 * no answer and the key stayed in progress. A handler that throws before
 * it answers still releases its key. Express 5 and 4, with and without `compression` mounted before the
 * middleware (which wraps `res.end`: the middleware then patches the response itself). On a SQLite file.
 */

import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import compression from 'compression';
import express from 'express';
import express4 from 'express4';
import { afterAll, describe, expect, it } from 'vitest';
import { idempotency } from '../../../src/express/index.js';
import { createIdempotency } from '../../../src/index.js';
import { sqliteStore } from '../../../src/sqlite/index.js';
import { listenExpress } from '../../helpers/listen-express.js';

const dir = mkdtempSync(join(tmpdir(), 'idempotency-kit-express-error-after-answer-'));
const database = new Database(join(dir, 'records.db'));
const engine = createIdempotency({ store: sqliteStore({ database }) });

afterAll(() => {
  database.close();
  rmSync(dir, { recursive: true, force: true });
});

type SessionRequest = express.Request & { session?: unknown };

/**
 * A session middleware that writes its cookie when the head goes out (as cookie-session and
 * express-session do, through on-headers, which wraps `res.writeHead` so): a session it cannot serialize
 * throws from `writeHead`.
 */
const session: express.RequestHandler = (req, res, next) => {
  const writeHead = res.writeHead;
  res.writeHead = function (this: express.Response, ...args: unknown[]) {
    const value = (req as SessionRequest).session;
    (req as SessionRequest).session = undefined; // written once: the error's reply has none
    if (value !== undefined) res.setHeader('set-cookie', `session=${JSON.stringify(value)}`);
    return (writeHead as (...a: unknown[]) => express.Response).apply(this, args);
  } as express.Response['writeHead'];
  next();
};

const circular = () => {
  const order: Record<string, unknown> = { id: 'ord_1' };
  order.self = order;
  return order;
};

/** Each path charges, then answers something its serializer cannot write on the first run only. */
function routes(app: express.Express, charges: Map<string, number>): void {
  const charge = (req: express.Request) => {
    const count = (charges.get(req.path) ?? 0) + 1;
    charges.set(req.path, count);
    return count;
  };
  app.post('/bigint', (req, res) => {
    const count = charge(req);
    res.status(201).json({ charged: count, amount: count === 1 ? 4200n : 4200 });
  });
  app.post('/circular', (req, res) => {
    const count = charge(req);
    res.status(201).json(count === 1 ? circular() : { charged: count });
  });
  app.post('/send-object', (req, res) => {
    const count = charge(req);
    res.status(201).send({ charged: count, amount: count === 1 ? 4200n : 4200 });
  });
  app.post('/send-bigint', (req, res) => {
    const count = charge(req);
    res.status(201).send(count === 1 ? 4200n : String(count));
  });
  app.post('/jsonp', (req, res) => {
    const count = charge(req);
    res.status(201).jsonp({ charged: count, amount: count === 1 ? 4200n : 4200 });
  });
  // A session the handler changes, which the session middleware serializes as the head goes out.
  app.post('/session', (req, res) => {
    const count = charge(req);
    (req as SessionRequest).session = { amount: count === 1 ? 4200n : 4200 };
    res.status(201).json({ charged: count });
  });
  // Controls: the key is released, the retry runs.
  app.post('/thrown', (req, res) => {
    if (charge(req) === 1) throw new Error('card network down');
    res.status(201).json({ charged: 2 });
  });
  app.post('/failed-5xx-answer', (req, res) => {
    if (charge(req) === 1) res.status(502).json({ error: 'card network down', code: 7n });
    else res.status(201).json({ charged: 2 });
  });
}

/** The retry of a key whose first answer was lost: 409 `response_not_captured`. */
async function expectNeverRunAgain(post: (path: string) => Promise<Response>, path: string) {
  const retry = await post(path);
  expect(retry.status, path).toBe(409);
  expect(((await retry.json()) as { code: string }).code, path).toBe('response_not_captured');
}

describe.each([
  ['Express 5', express, false],
  ['Express 4', express4 as unknown as typeof express, false],
  ['Express 5 with compression before', express, true],
  ['Express 4 with compression before', express4 as unknown as typeof express, true],
])('%s', (_name, framework, compressed) => {
  async function start() {
    const charges = new Map<string, number>();
    const app = framework();
    if (compressed) app.use(compression({ threshold: 0 }));
    app.use(session);
    app.use(idempotency({ engine }));
    routes(app, charges);
    // An error handler that answers 500 without the error's details, as most apps have.
    app.use(
      (
        _error: Error,
        _req: express.Request,
        res: express.Response,
        _next: express.NextFunction,
      ) => {
        res.status(500).json({ error: 'internal' });
      },
    );
    const base = await listenExpress(app);
    const key = randomUUID();
    const post = (path: string, signal?: AbortSignal) =>
      fetch(`${base}${path}`, {
        method: 'POST',
        headers: { 'idempotency-key': `${key}${path}` },
        signal,
      });
    return { post, charges };
  }

  it('keeps the key when the answer cannot be serialized: the retry gets 409, never a second charge', async () => {
    const { post, charges } = await start();
    for (const path of ['/bigint', '/circular', '/send-object', '/send-bigint', '/jsonp']) {
      const first = await post(path);
      expect(first.status, path).toBe(500);
      await expectNeverRunAgain(post, path);
      expect(charges.get(path), path).toBe(1);
    }
  });

  it('keeps the key when a writeHead listener throws on the answer’s head, and sends the error’s reply', async () => {
    const { post, charges } = await start();
    // Before, the error's reply waited behind the handler's end, which never went out: no answer.
    const first = await post('/session', AbortSignal.timeout(2000));
    expect(first.status).toBe(500);
    expect(first.headers.get('set-cookie')).toBeNull();
    await expectNeverRunAgain(post, '/session');
    expect(charges.get('/session')).toBe(1);
  });

  it('still releases the key of a handler that throws before answering, and of a 5xx answer', async () => {
    const { post, charges } = await start();
    for (const path of ['/thrown', '/failed-5xx-answer']) {
      expect((await post(path)).status, path).toBe(500);
      const retry = await post(path);
      expect([retry.status, await retry.json()], path).toEqual([201, { charged: 2 }]);
      expect(charges.get(path), path).toBe(2);
    }
  });
});
