import type { AddressInfo } from 'node:net';
import express, { type Request } from 'express';
import express4 from 'express4';
import { afterEach, describe, expect, it } from 'vitest';
import { idempotency } from '../../../src/express/index.js';
import { setRequestContext } from '../../../src/express/request-context.js';
import type { IdempotencyContext } from '../../../src/http/index.js';
import { memoryStore } from '../../../src/index.js';

const servers: Array<{ close(): void }> = [];
afterEach(() => {
  for (const server of servers.splice(0)) server.close();
});

/** An Express app on a free port; resolves to its base URL. */
async function listen(app: express.Express): Promise<string> {
  return new Promise((resolve) => {
    const server = app.listen(0, '127.0.0.1', () => {
      resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    });
    servers.push(server);
  });
}

const post = (url: string, key: string) =>
  fetch(url, { method: 'POST', headers: { 'idempotency-key': key } }).then((r) => r.json());

// The context is an accessor on Express's request prototype: each major builds requests its own way.
describe.each([
  ['Express 5', express],
  ['Express 4', express4],
])('req.idempotency on %s', (_name, framework) => {
  it('gives each request its own context without adding a property to the request', async () => {
    const app = framework();
    app.use(idempotency({ store: memoryStore() }));
    app.post('/orders', (req, res) => {
      res.json({
        key: req.idempotency?.key,
        own: Object.hasOwn(req, 'idempotency'),
        keys: Object.keys(req).includes('idempotency'),
      });
    });
    const url = `${await listen(app)}/orders`;
    const [first, second] = await Promise.all([post(url, 'ctx-a'), post(url, 'ctx-b')]);
    expect(first).toEqual({ key: 'ctx-a', own: false, keys: false });
    expect(second).toEqual({ key: 'ctx-b', own: false, keys: false });
  });

  it('is undefined on a request the layer does not apply to', async () => {
    const app = framework();
    app.use(idempotency({ store: memoryStore() }));
    app.get('/orders', (req, res) => {
      res.json({ present: req.idempotency !== undefined });
    });
    const base = await listen(app);
    expect(await (await fetch(`${base}/orders`)).json()).toEqual({ present: false });
  });

  it('behaves as a property: an assignment replaces the context of that request only', async () => {
    const app = framework();
    app.use(idempotency({ store: memoryStore() }));
    app.post('/orders', (req, res) => {
      const before = req.idempotency?.key;
      req.idempotency = undefined;
      res.json({ before, after: req.idempotency ?? null });
    });
    app.post('/other', (req, res) => {
      res.json({ key: req.idempotency?.key });
    });
    const base = await listen(app);
    expect(await post(`${base}/orders`, 'assign-1')).toEqual({ before: 'assign-1', after: null });
    expect(await post(`${base}/other`, 'assign-2')).toEqual({ key: 'assign-2' });
  });

  it('falls back to a plain property on a request without an Express prototype', () => {
    const req = {} as Request;
    const context = { key: 'plain' } as IdempotencyContext;
    setRequestContext(req, context);
    expect(Object.hasOwn(req, 'idempotency')).toBe(true);
    expect(req.idempotency).toBe(context);
  });
});
