/**
 * A handler that goes on after `reply.send(x)`: it throws (synchronously, or its promise rejects, with or
 * without an await before), sends a second answer, or returns a value beside it. Without the plugin the
 * reply has ended by then, and Fastify drops what came after it: the client gets `x`. Under the plugin the
 * end waits for the outcome to be stored, so Fastify sent the newcomer too, and it went out first: the
 * client got the error's 500 (or the second answer) while `x` was stored and replayed to its retry. The
 * client now gets `x` as without the plugin, and the retry the same bytes; the handler runs once.
 */
import type { AddressInfo } from 'node:net';
import fastify, { type FastifyInstance } from 'fastify';
import { afterEach, expect, it } from 'vitest';
import { idempotencyPlugin } from '../../../src/fastify/index.js';
import { memoryStore } from '../../../src/index.js';

let app: FastifyInstance | undefined;
afterEach(async () => {
  await app?.close();
  app = undefined;
});

let runs = 0;
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The routes, each a handler that does something more after sending `{"id":"first"}` with 201. */
function routes(app: FastifyInstance): void {
  app.post('/sync-throw', (_request, reply) => {
    runs++;
    reply.code(201).send({ id: 'first' });
    throw new Error('after the answer');
  });
  app.post('/async-throw', async (_request, reply) => {
    runs++;
    reply.code(201).send({ id: 'first' });
    throw new Error('after the answer');
  });
  app.post('/async-throw-after-await', async (_request, reply) => {
    runs++;
    await pause(5);
    reply.code(201).send({ id: 'first' });
    throw new Error('after the answer');
  });
  app.post('/sync-twice', (_request, reply) => {
    runs++;
    reply.code(201).send({ id: 'first' });
    reply.code(202).send({ id: 'second' });
  });
  app.post('/async-twice', async (_request, reply) => {
    runs++;
    reply.code(201).send({ id: 'first' });
    return reply.code(202).send({ id: 'second' });
  });
  app.post('/sync-send-and-return', (_request, reply) => {
    runs++;
    reply.code(201).send({ id: 'first' });
    return { id: 'second' };
  });
}

/** An app with the routes, with the plugin or without, and a POST to it (status, body, replay mark). */
async function start(withPlugin: boolean, decorated = false) {
  app = fastify();
  // Most apps decorate the reply through their plugins (cookies, sensible, view): Fastify then makes its
  // replies with another constructor, whose fields differ until an error comes.
  if (decorated) app.decorateReply('helper', null);
  app.setErrorHandler((error, _request, reply) => {
    reply.code(500).send({ message: `custom: ${(error as Error).message}` });
  });
  if (withPlugin) await app.register(idempotencyPlugin, { store: memoryStore(), key: 'required' });
  routes(app);
  await app.listen({ port: 0, host: '127.0.0.1' });
  const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  return async (path: string) => {
    const response = await fetch(`${base}${path}`, {
      method: 'POST',
      headers: { 'idempotency-key': `key${path}` },
      signal: AbortSignal.timeout(3000),
    });
    return {
      status: response.status,
      body: await response.text(),
      replayed: response.headers.get('idempotent-replayed'),
    };
  };
}

const paths = [
  '/sync-throw',
  '/async-throw',
  '/async-throw-after-await',
  '/sync-twice',
  '/async-twice',
  '/sync-send-and-return',
];

it.each(paths)('without the plugin, %s answers the first send (the baseline)', async (path) => {
  // Arrange
  const post = await start(false);
  // Act
  const first = await post(path);
  // Assert
  expect(first).toEqual({ status: 201, body: '{"id":"first"}', replayed: null });
});

it.each(paths)(
  'under the plugin, %s answers the first send as without it, and replays that to the retry',
  async (path) => {
    // Arrange
    runs = 0;
    const post = await start(true);
    // Act
    const first = await post(path);
    const retry = await post(path);
    // Assert: before, the client got the error's 500 (or `{"id":"second"}` with 202), and the retry 201.
    expect(first).toEqual({ status: 201, body: '{"id":"first"}', replayed: null });
    expect(retry).toEqual({ ...first, replayed: 'true' });
    expect(runs).toBe(1);
  },
);

it.each(paths)(
  'in an app that decorates the reply, %s answers the first send too, and replays it',
  async (path) => {
    // Arrange
    runs = 0;
    const post = await start(true, true);
    // Act
    const first = await post(path);
    const retry = await post(path);
    // Assert: before, the state read as unknown there and nothing was dropped (the 500, or the second).
    expect(first).toEqual({ status: 201, body: '{"id":"first"}', replayed: null });
    expect(retry).toEqual({ ...first, replayed: 'true' });
    expect(runs).toBe(1);
  },
);

it('the error page still goes out when an onSend hook fails on an answer the handler threw after', async () => {
  // Arrange: the thrown error is dropped; the hook's error, after it, is answered by the custom handler.
  runs = 0;
  app = fastify();
  app.setErrorHandler((error, _request, reply) => {
    reply.code(500).send({ message: `custom: ${(error as Error).message}` });
  });
  await app.register(idempotencyPlugin, { store: memoryStore(), key: 'required' });
  app.addHook('onSend', async (_request, reply, payload) => {
    if (reply.statusCode === 201) throw new Error('signing failed');
    return payload;
  });
  app.post('/pay', async (_request, reply) => {
    runs++;
    reply.code(201).send({ id: 'first' });
    throw new Error('after the answer');
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  // Act
  const response = await fetch(`${base}/pay`, {
    method: 'POST',
    headers: { 'idempotency-key': 'k' },
    signal: AbortSignal.timeout(3000),
  });
  // Assert
  expect(response.status).toBe(500);
  expect(await response.json()).toEqual({ message: 'custom: signing failed' });
  expect(runs).toBe(1);
});

/** An app whose first `onError` hook, registered before the plugin, fails: Fastify skips the plugin's. */
async function startWithFailingOnError(
  routesOf: (app: FastifyInstance) => void,
  options: { decorated?: boolean; handlerTimeout?: number } = {},
) {
  app = fastify(
    options.handlerTimeout === undefined ? {} : { handlerTimeout: options.handlerTimeout },
  );
  if (options.decorated === true) app.decorateReply('helper', null);
  app.setErrorHandler((error, _request, reply) => {
    reply.code(500).send({ message: `custom: ${(error as Error).message}` });
  });
  app.addHook('onError', async () => {
    throw new Error('onError hook failed');
  });
  routesOf(app);
  await app.listen({ port: 0, host: '127.0.0.1' });
  const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  return async (path: string) => {
    const response = await fetch(`${base}${path}`, {
      method: 'POST',
      headers: { 'idempotency-key': `key${path}` },
      signal: AbortSignal.timeout(3000),
    });
    return { status: response.status, body: await response.text() };
  };
}

it('the error page goes out when the answer fails to serialize and an onError hook before the plugin fails', async () => {
  // Arrange: the plugin's onError never runs, so only Fastify's own state shows its error handling began.
  runs = 0;
  const post = await startWithFailingOnError((app) => {
    void app.register(idempotencyPlugin, { store: memoryStore(), key: 'required' });
    app.after(() => {
      app.post('/bigint', async (_request, reply) => {
        runs++;
        return reply.code(201).send({ n: 10n });
      });
    });
  });
  // Act
  const first = await post('/bigint');
  const retry = await post('/bigint');
  // Assert: before, the page was dropped as a second answer: no response, the key in progress for good.
  expect(first.status).toBe(500);
  expect(first.body).toMatch(/^\{"message":"custom: .*BigInt/);
  expect(retry.status).not.toBe(500);
  expect(JSON.parse(retry.body)).toMatchObject({ code: 'response_not_captured' });
  expect(runs).toBe(1);
});

it.each([
  ['', false],
  [', in an app that decorates the reply', true],
])(
  'the error page goes out when an onSend hook fails on the answer and an onError hook before the plugin fails%s',
  async (_name, decorated) => {
    // Arrange
    runs = 0;
    const post = await startWithFailingOnError(
      (app) => {
        app.addHook('onSend', async (_request, reply, payload) => {
          if (reply.statusCode === 201) throw new Error('signing failed');
          return payload;
        });
        void app.register(idempotencyPlugin, { store: memoryStore(), key: 'required' });
        app.after(() => {
          app.post('/signed', async (_request, reply) => {
            runs++;
            return reply.code(201).send({ id: 'first' });
          });
        });
      },
      { decorated },
    );
    // Act
    const first = await post('/signed');
    const retry = await post('/signed');
    // Assert
    expect(first).toEqual({ status: 500, body: '{"message":"custom: signing failed"}' });
    expect(JSON.parse(retry.body)).toMatchObject({ code: 'response_not_captured' });
    expect(runs).toBe(1);
  },
);

it('the error page goes out when reply.send throws inside Fastify and the handler rethrows', async () => {
  // Arrange: a custom serializer that fails is called within `reply.send`, which throws: nothing was sent.
  runs = 0;
  app = fastify();
  app.setErrorHandler((error, _request, reply) => {
    reply.code(500).send({ message: `custom: ${(error as Error).message}` });
  });
  await app.register(idempotencyPlugin, { store: memoryStore(), key: 'required' });
  app.post('/serializer', (_request, reply) => {
    runs++;
    reply
      .code(201)
      .type('application/json')
      .serializer(() => {
        throw new Error('serializer failed');
      })
      .send('text');
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  const post = async () => {
    const response = await fetch(`${base}/serializer`, {
      method: 'POST',
      headers: { 'idempotency-key': 'k' },
      signal: AbortSignal.timeout(3000),
    });
    return { status: response.status, body: await response.text() };
  };
  // Act
  const first = await post();
  const retry = await post();
  // Assert: before, the handler's error was dropped as coming after an answer that was never sent. The
  // page is Fastify's default, as without the plugin: the reply's serializer fails on the custom page too.
  // Nothing was answered, so the key is released, and the retry runs the handler again.
  expect(first).toEqual({
    status: 500,
    body: '{"statusCode":500,"error":"Internal Server Error","message":"serializer failed"}',
  });
  expect(retry).toEqual(first);
  expect(runs).toBe(2);
});

it.each([false, true])(
  'headers set after the answer do not reach the client (with the plugin: %s), as the replay has none',
  async (withPlugin) => {
    // Arrange: without the plugin the reply has ended by then, and what the handler sets goes nowhere.
    app = fastify();
    if (withPlugin)
      await app.register(idempotencyPlugin, { store: memoryStore(), key: 'required' });
    app.post('/late-headers', (_request, reply) => {
      reply.code(201).header('set-cookie', 'a=1').send({ id: 'first' });
      reply.header('x-late', '1').header('set-cookie', 'b=2');
      reply.header('content-type', 'text/plain').send('second');
    });
    await app.listen({ port: 0, host: '127.0.0.1' });
    const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    const post = async () => {
      const response = await fetch(`${base}/late-headers`, {
        method: 'POST',
        headers: { 'idempotency-key': 'k' },
        signal: AbortSignal.timeout(3000),
      });
      return {
        status: response.status,
        type: response.headers.get('content-type'),
        late: response.headers.get('x-late'),
        cookies: response.headers.getSetCookie(),
        body: await response.text(),
      };
    };
    // Act
    const first = await post();
    // Assert: before, the client got the JSON body labelled text/plain, with the late header and cookie.
    expect(first).toEqual({
      status: 201,
      type: 'application/json; charset=utf-8',
      late: null,
      cookies: ['a=1'],
      body: '{"id":"first"}',
    });
    if (withPlugin) expect((await post()).type).toBe(first.type);
  },
);

it('a handlerTimeout answered while an onError hook before the plugin fails keeps the key: the retry does not run the handler beside the first', async () => {
  // Arrange: the plugin's onError never sees the timeout's error; the signal Fastify aborted with it does.
  runs = 0;
  let finished = 0;
  const post = await startWithFailingOnError(
    (app) => {
      void app.register(idempotencyPlugin, { store: memoryStore(), key: 'required' });
      app.after(() => {
        app.post('/slow', async (_request, reply) => {
          runs++;
          await pause(400);
          finished++;
          return reply.code(201).send({ id: 'charged' });
        });
      });
    },
    { handlerTimeout: 30 },
  );
  // Act
  const first = await post('/slow');
  const retry = await post('/slow');
  // Assert: before, the timeout's page released the key as an ordinary 5xx, and the retry ran a second
  // charge while the first still ran.
  expect(first.status).toBeGreaterThanOrEqual(500);
  expect(JSON.parse(retry.body)).toMatchObject({ code: 'response_not_captured' });
  expect(runs).toBe(1);
  await pause(450);
  expect(finished).toBe(1);
});
