/**
 * A `c.res` a middleware before the layer set before calling `next()` (a default answer it means the
 * handler to replace). Hono marks the context finalized when `c.res` is set, and then drops every response
 * returned after it: the handler's answer never reached `c.res`, and the layer stored the earlier response
 * in its place. A 200 default was replayed to every retry (the handler's 201 lost for good), a 503 default
 * released the key after the handler had charged (the retry charged a second time), and a handler that
 * answered nothing had the default stored. Its answers (a replay, a problem) were dropped as well: a
 * request without a required key got the default, not its 400. Only the handler's answer is judged and
 * stored now. On `@hono/node-server`.
 */
import { randomUUID } from 'node:crypto';
import { type Context, Hono, type MiddlewareHandler } from 'hono';
import { expect, it } from 'vitest';
import { idempotency } from '../../../src/hono/index.js';
import { memoryStore } from '../../../src/index.js';
import { listenFetchForTest } from '../../helpers/listen-fetch.js';

/** A middleware before the layer that sets a default answer, then lets the request on. */
const presets =
  (status: number, body = 'default'): MiddlewareHandler =>
  async (c, next) => {
    c.res = new Response(body, { status, headers: { 'x-preset': 'yes' } });
    await next();
  };

/** An app with `earlier` before the layer and a counted `/charges` handler; its base URL and run count. */
async function appWith(
  earlier: MiddlewareHandler,
  handler: (c: Context, runs: number) => Response | undefined,
  options: { key?: 'required' } = {},
): Promise<{ send: (key?: string) => Promise<Response>; runs: () => number }> {
  let runs = 0;
  const app = new Hono();
  app.use(earlier);
  app.use(idempotency({ store: memoryStore(), ...options }));
  app.post('/charges', ((c: Context) => handler(c, ++runs)) as never);
  const base = await listenFetchForTest(app.fetch);
  return {
    send: (key) =>
      fetch(`${base}/charges`, {
        method: 'POST',
        headers: key === undefined ? {} : { 'idempotency-key': key },
      }),
    runs: () => runs,
  };
}

it("stores and replays the handler's answer, not a default a middleware before the layer set", async () => {
  const app = await appWith(presets(200), (c) => c.json({ charged: true }, 201));
  const key = randomUUID();
  const first = await app.send(key);
  // Before, Hono dropped the handler's 201 (the context was finalized) and the layer stored the default.
  expect(first.status).toBe(201);
  expect(await first.json()).toEqual({ charged: true });
  // The earlier middleware's headers are merged as Hono merges a `c.res` set before the handler's.
  expect(first.headers.get('x-preset')).toBe('yes');
  const retry = await app.send(key);
  expect(retry.headers.get('idempotent-replayed')).toBe('true');
  expect(retry.status).toBe(201);
  expect(await retry.json()).toEqual({ charged: true });
  expect(app.runs()).toBe(1);
});

it('does not release the key of a handler that charged when the default before it is a 5xx', async () => {
  const app = await appWith(presets(503, 'unavailable'), (c) => c.json({ charged: true }, 201));
  const key = randomUUID();
  const first = await app.send(key);
  expect(first.status).toBe(201);
  await first.arrayBuffer();
  // Before, the stored "answer" was the 503 default: the key was released and the retry charged again.
  const retry = await app.send(key);
  expect(retry.headers.get('idempotent-replayed')).toBe('true');
  expect(retry.status).toBe(201);
  expect(app.runs()).toBe(1);
});

it('stores nothing for a handler that answered nothing: the default goes out, as without the layer', async () => {
  const app = await appWith(presets(200), (c, runs) =>
    runs === 1 ? undefined : c.json({ charged: true }, 201),
  );
  const key = randomUUID();
  const first = await app.send(key);
  // What Hono sends without the layer: the earlier middleware's response.
  expect(first.status).toBe(200);
  expect(await first.text()).toBe('default');
  // Before, the default was stored as the handler's answer and replayed; now the key is released.
  const retry = await app.send(key);
  expect(retry.headers.get('idempotent-replayed')).toBeNull();
  expect(retry.status).toBe(201);
  expect(app.runs()).toBe(2);
});

it("sends the layer's own answers (a problem, a replay), not the default before it", async () => {
  const app = await appWith(presets(200), (c) => c.json({ charged: true }, 201), {
    key: 'required',
  });
  const missing = await app.send();
  // Before, Hono dropped the 400 problem for the default 200: the client saw a success, nothing ran.
  expect(missing.status).toBe(400);
  expect(missing.headers.get('content-type')).toBe('application/problem+json');
  expect(app.runs()).toBe(0);
});

it('judges a thrown value after the answer by that answer when a default came before', async () => {
  // A middleware between the layer and the handler that throws a non-`Error` after the handler answered:
  // Hono lets it out of `next()`. The answer was never set on the finalized context, so the layer saw no
  // answer and released the key.
  let runs = 0;
  const app = new Hono();
  app.use(presets(200));
  app.use(idempotency({ store: memoryStore() }));
  app.use(async (_c, next) => {
    await next();
    throw { code: 'audit_unavailable' };
  });
  app.post('/charges', (c) => {
    runs++;
    return c.json({ charged: true }, 201);
  });
  const key = randomUUID();
  const send = () =>
    app.request('/charges', { method: 'POST', headers: { 'idempotency-key': key } });
  await expect(send()).rejects.toEqual({ code: 'audit_unavailable' });
  const retry = await send();
  expect(retry.status).toBe(409);
  expect(((await retry.json()) as { code: string }).code).toBe('response_not_captured');
  expect(runs).toBe(1);
});

it("lets the handler's c.header() change an earlier response whose headers are immutable", async () => {
  // A `fetch()` result's headers are immutable: Hono copies a finalized `c.res` before `c.header()`
  // changes it, and the layer keeps that working while it un-finalizes.
  const fetches: MiddlewareHandler = async (c, next) => {
    c.res = await fetch('data:text/plain,maintenance');
    await next();
  };
  const app = await appWith(fetches, (c) => {
    c.header('x-order', 'ord_1');
    return c.json({ charged: true }, 201);
  });
  const key = randomUUID();
  const first = await app.send(key);
  expect(first.status).toBe(201);
  expect(first.headers.get('x-order')).toBe('ord_1');
  await first.arrayBuffer();
  const retry = await app.send(key);
  expect(retry.headers.get('idempotent-replayed')).toBe('true');
  expect(retry.status).toBe(201);
  expect(app.runs()).toBe(1);
});

it("sends the handler's answer whole, with its own Content-Length and Location, not the earlier response's", async () => {
  // Left as Hono's `c.res`, the earlier response's headers were copied over the handler's answer: its 201
  // went out (and was replayed) cut to the earlier body's 7 bytes, with the earlier Location.
  const earlier: MiddlewareHandler = async (c, next) => {
    c.res = new Response('pending', {
      status: 202,
      headers: {
        'content-length': '7',
        location: '/pending',
        'cache-control': 'no-store',
        'x-request-id': 'req_1',
      },
    });
    await next();
  };
  const app = await appWith(earlier, (c) => {
    c.header('location', '/orders/42');
    return c.json({ id: 42, status: 'charged' }, 201);
  });
  const key = randomUUID();
  for (const expectReplay of [false, true]) {
    const response = await app.send(key);
    expect(response.status).toBe(201);
    expect(await response.text()).toBe('{"id":42,"status":"charged"}');
    expect(response.headers.get('location')).toBe('/orders/42');
    expect(response.headers.get('cache-control')).toBeNull();
    expect(response.headers.get('idempotent-replayed')).toBe(expectReplay ? 'true' : null);
    // A header not about the earlier body is carried, as `c.header` carries it.
    if (!expectReplay) expect(response.headers.get('x-request-id')).toBe('req_1');
  }
  expect(app.runs()).toBe(1);
});

it("carries the earlier response's CORS and cookie headers to a Response the handler returns as it is", async () => {
  // A middleware before the layer that sets a default answer with a session cookie and a CORS header.
  const headers = {
    'access-control-allow-origin': 'https://app.test',
    'set-cookie': 'session=abc; Path=/; HttpOnly',
    'x-request-id': 'req_1',
  };
  const earlier: MiddlewareHandler = async (c, next) => {
    c.res = new Response('default', { status: 200, headers });
    await next();
  };
  const raw = () =>
    new Response('{"charged":true}', {
      status: 201,
      headers: { 'content-type': 'application/json', 'set-cookie': 'cart=1; Path=/' },
    });
  // Without the layer, Hono sends the earlier response: the client gets its cookie and CORS header.
  const plain = new Hono();
  plain.use(earlier);
  plain.post('/charges', raw);
  const alone = await plain.request('/charges', { method: 'POST' });
  expect(alone.headers.get('access-control-allow-origin')).toBe('https://app.test');
  expect(alone.headers.getSetCookie()).toEqual(['session=abc; Path=/; HttpOnly']);

  const app = await appWith(earlier, raw);
  const key = randomUUID();
  const first = await app.send(key);
  expect(first.status).toBe(201);
  expect(await first.json()).toEqual({ charged: true });
  // Before, Hono took the returned Response as it was: the CORS header, the cookie and the request id
  // of the earlier response were lost (a browser could not read the 201, the session was not set).
  expect(first.headers.get('access-control-allow-origin')).toBe('https://app.test');
  expect(first.headers.get('x-request-id')).toBe('req_1');
  expect(first.headers.getSetCookie().sort()).toEqual([
    'cart=1; Path=/',
    'session=abc; Path=/; HttpOnly',
  ]);
  const retry = await app.send(key);
  expect(retry.status).toBe(201);
  expect(retry.headers.get('idempotent-replayed')).toBe('true');
  // The handler's cookie is never replayed; the earlier middleware set its own again on this request.
  expect(retry.headers.getSetCookie()).toEqual(['session=abc; Path=/; HttpOnly']);
  expect(await retry.json()).toEqual({ charged: true });
  expect(app.runs()).toBe(1);
});

it("leaves the handler's own value of a header the earlier response also set", async () => {
  const earlier: MiddlewareHandler = async (c, next) => {
    c.res = new Response('default', { headers: { 'x-request-id': 'req_1', 'x-tenant': 't_1' } });
    await next();
  };
  const app = await appWith(earlier, () =>
    Response.json({ charged: true }, { status: 201, headers: { 'x-request-id': 'req_own' } }),
  );
  const first = await app.send(randomUUID());
  expect(first.status).toBe(201);
  expect(first.headers.get('x-request-id')).toBe('req_own');
  expect(first.headers.get('x-tenant')).toBe('t_1');
  await first.arrayBuffer();
});

it('carries them to a returned Response whose headers are immutable (Response.redirect)', async () => {
  const app = new Hono();
  app.use(async (c, next) => {
    c.res = new Response('default', {
      headers: { 'access-control-allow-origin': 'https://app.test' },
    });
    await next();
  });
  app.use(idempotency({ store: memoryStore() }));
  app.post('/charges', () => Response.redirect('https://app.test/orders/42', 303));
  const sent = await app.request('/charges', {
    method: 'POST',
    headers: { 'idempotency-key': randomUUID() },
  });
  expect(sent.status).toBe(303);
  expect(sent.headers.get('location')).toBe('https://app.test/orders/42');
  expect(sent.headers.get('access-control-allow-origin')).toBe('https://app.test');
});

it.each([
  ['a c helper', (c: Context) => c.json({ charged: true }, 201)],
  ['a Response returned as it is', () => Response.json({ charged: true }, { status: 201 })],
])("carries each of the earlier response's cookies once to %s", async (_, handler) => {
  const earlier: MiddlewareHandler = async (c, next) => {
    const headers = new Headers();
    headers.append('set-cookie', 'session=abc; Path=/');
    headers.append('set-cookie', 'csrf=xyz; Path=/');
    c.res = new Response('default', { headers });
    await next();
  };
  const app = await appWith(earlier, handler);
  const first = await app.send(randomUUID());
  expect(first.status).toBe(201);
  // Before, each cookie went out once per cookie of the earlier response: four headers for two.
  expect(first.headers.getSetCookie().sort()).toEqual(['csrf=xyz; Path=/', 'session=abc; Path=/']);
  await first.arrayBuffer();
});
