/**
 * What the Hono middleware stores and answers around the handler's response: a handler that produced no
 * response (Hono answers 500) is never stored; the layer's answers (replays, problems) carry the headers
 * middleware before the layer set with `c.header` (hono/request-id), as the handler's response did; and on
 * `@hono/node-server` a replayed body-less response carries no Content-Type the first one did not have.
 */
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { type Context, Hono } from 'hono';
import { requestId } from 'hono/request-id';
import { afterEach, expect, it } from 'vitest';
import { idempotency } from '../../../src/hono/index.js';
import { memoryStore } from '../../../src/index.js';

let close: (() => void) | undefined;
afterEach(() => {
  close?.();
  close = undefined;
});

const post = (app: Hono, path: string, headers: Record<string, string>) =>
  app.request(path, { method: 'POST', headers });

it('never stores the placeholder of a handler that returned no response: Hono answers 500 and the retry runs again', async () => {
  let runs = 0;
  const app = new Hono();
  app.use(idempotency({ store: memoryStore() }));
  // A handler that forgot its `return` on one path (which an `any` in its code can hide from the types).
  app.post('/charges', ((c: Context) => {
    runs++;
    if (runs === 2) return c.json({ charged: true }, 201);
    c.status(201);
    return undefined;
  }) as never);
  const key = randomUUID();
  const first = await post(app, '/charges', { 'idempotency-key': key });
  expect(first.status).toBe(500); // Hono's "Context is not finalized"
  // Before, the layer stored `c.res`, Hono's empty 200 placeholder, and replayed it to every retry.
  const retry = await post(app, '/charges', { 'idempotency-key': key });
  expect(retry.headers.get('idempotent-replayed')).toBeNull();
  expect(retry.status).toBe(201);
  expect(runs).toBe(2);
});

it('answers replays and problems with the headers a middleware before the layer set with c.header', async () => {
  const app = new Hono();
  app.use(requestId());
  app.use(idempotency({ store: memoryStore(), key: 'required' }));
  app.post('/charges', (c) => c.json({ charged: true }, 201));
  const key = randomUUID();
  const first = await post(app, '/charges', { 'idempotency-key': key, 'x-request-id': 'first' });
  expect(first.headers.get('x-request-id')).toBe('first');
  const replay = await post(app, '/charges', { 'idempotency-key': key, 'x-request-id': 'second' });
  expect(replay.headers.get('idempotent-replayed')).toBe('true');
  // Before, replays and the layer's problems went out without it.
  expect(replay.headers.get('x-request-id')).toBe('second');
  expect(await replay.json()).toEqual({ charged: true });
  const missing = await post(app, '/charges', { 'x-request-id': 'third' });
  expect(missing.status).toBe(400);
  expect(missing.headers.get('x-request-id')).toBe('third');
  expect(missing.headers.get('content-type')).toBe('application/problem+json');
});

it('replays a body-less response on @hono/node-server without a Content-Type the first did not have', async () => {
  const app = new Hono();
  app.use(idempotency({ store: memoryStore() }));
  app.post('/orders', (c) => c.body(null, 201, { location: '/orders/1' }));
  app.post('/checkout', (c) => c.redirect('/orders/1', 303));
  const server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' });
  close = () => server.close();
  await new Promise((resolve) => server.once('listening', resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  for (const path of ['/orders', '/checkout']) {
    const key = randomUUID();
    const send = () =>
      fetch(`${base}${path}`, {
        method: 'POST',
        headers: { 'idempotency-key': key },
        redirect: 'manual',
      });
    const first = await send();
    expect(first.headers.get('content-type'), path).toBeNull();
    const replay = await send();
    expect(replay.headers.get('idempotent-replayed'), path).toBe('true');
    expect(replay.status, path).toBe(first.status);
    expect(replay.headers.get('location'), path).toBe('/orders/1');
    // Before, node-server gave the replay's empty body its default `text/plain; charset=UTF-8`.
    expect(replay.headers.get('content-type'), path).toBeNull();
    expect(await replay.text(), path).toBe('');
  }
});
