/**
 * Fastify's `handlerTimeout` answers 503 while the handler still runs (it only aborts `request.signal`).
 * That 503 is Fastify's, not the handler's outcome: the key is not released, so a retry is answered 409
 * `response_not_captured` instead of running the charge a second time beside the first, also once the
 * engine's `maxExecution` and the lease have passed (left in progress, the key was then taken over).
 * When it passes in a hook that runs after the claim, before the handler, or while the claim itself is
 * being made, nothing ran: the key is released. When the handler answers before the timeout's reply goes
 * out (an async error handler still at work on it), its answer goes out, as without the plugin, and is
 * stored and replayed; one that would release the key (a 5xx, a throw's 5xx, or a page the error handler
 * sent through another reference to the reply, taken for the handler's) keeps the marker instead.
 */
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { afterEach, expect, it } from 'vitest';
import { idempotencyPlugin } from '../../../src/fastify/index.js';
import { createIdempotency, memoryStore } from '../../../src/index.js';

let app: FastifyInstance | undefined;
afterEach(async () => {
  await app?.close();
  app = undefined;
});

/** Start `server` on a free port; a function that POSTs to its /charges, always with the same new key. */
async function postsOfOneKey(server: FastifyInstance): Promise<() => Promise<Response>> {
  await server.listen({ port: 0, host: '127.0.0.1' });
  const url = `http://127.0.0.1:${(server.server.address() as AddressInfo).port}/charges`;
  const key = randomUUID();
  return () => fetch(url, { method: 'POST', headers: { 'idempotency-key': key } });
}

it('keeps the key of a handler Fastify timed out: the retry gets 409, never a second charge', async () => {
  let started = 0;
  let charged = 0;
  app = fastify();
  await app.register(idempotencyPlugin, {
    engine: createIdempotency({ store: memoryStore(), leaseMs: 300, maxExecution: '1s' }),
  });
  app.post('/charges', { handlerTimeout: 50 }, async (_request, reply) => {
    started++;
    if (started === 1) await sleep(300); // the first run outlasts the timeout, and still charges
    charged++;
    return reply.code(201).send({ charged });
  });
  const post = await postsOfOneKey(app);

  const first = await post();
  expect(first.status).toBe(503); // FST_ERR_HANDLER_TIMEOUT, the handler still running
  const retry = await post();
  // Before, the 503 released the key: the retry ran the handler beside the first, a second charge.
  expect(retry.status).toBe(409);
  const problem = (await retry.json()) as { code: string; detail: string };
  expect(problem.code).toBe('response_not_captured');
  // Before, the detail said the response went around the capture: it was Fastify's timeout answer.
  expect(problem.detail).toBe(
    "The first request was answered by a timeout (status 503) while its handler ran on, so the handler's own response could not be kept and its outcome is unknown; it will not be run again for this key. Check whether the operation took effect before sending it again with a new key.",
  );
  // Past maxExecution (1 s) and the lease (300 ms): still never run again.
  await sleep(1500);
  const later = await post();
  expect(later.status).toBe(409);
  expect(((await later.json()) as { code: string }).code).toBe('response_not_captured');
  expect(charged).toBe(1);
  expect(started).toBe(1);
});

it('releases the key when handlerTimeout passes in a hook after the claim: the handler never ran', async () => {
  let charged = 0;
  let hooked = 0;
  app = fastify();
  await app.register(idempotencyPlugin, {
    engine: createIdempotency({ store: memoryStore(), leaseMs: 300, maxExecution: '1s' }),
  });
  // A slow preHandler that another plugin's onRoute hook adds, so that Fastify runs it after the claim.
  await app.register(
    fp(async (instance) => {
      instance.addHook('onRoute', (route) => {
        const slow = async () => {
          hooked++;
          if (hooked === 1) await sleep(400); // only the first request's
        };
        route.preHandler = [route.preHandler ?? [], slow].flat();
      });
    }),
  );
  app.post('/charges', { handlerTimeout: 100 }, async (_request, reply) => {
    charged++;
    return reply.code(201).send({ charged });
  });
  const post = await postsOfOneKey(app);

  const first = await post();
  expect(first.status).toBe(503); // FST_ERR_HANDLER_TIMEOUT, in the slow hook
  await sleep(500); // the slow hook has returned: its handler is never run
  expect(charged).toBe(0);
  // Before, a response_not_captured marker was kept: every retry was answered 409, and nothing charged.
  const retry = await post();
  expect(retry.status).toBe(201);
  expect(charged).toBe(1);
});

it('releases the key when handlerTimeout passes while the claim is being made', async () => {
  let charged = 0;
  const store = memoryStore();
  // The first claim answers after the timeout (a store under load).
  const claim = store.claim.bind(store);
  let slow = true;
  store.claim = async (...args: Parameters<typeof claim>) => {
    if (slow) {
      slow = false;
      await sleep(300);
    }
    return claim(...args);
  };
  app = fastify();
  await app.register(idempotencyPlugin, {
    engine: createIdempotency({ store, leaseMs: 300, maxExecution: '10s' }),
  });
  app.post('/charges', { handlerTimeout: 100 }, async (_request, reply) => {
    charged++;
    return reply.code(201).send({ charged });
  });
  const post = await postsOfOneKey(app);

  const first = await post();
  expect(first.status).toBe(503); // FST_ERR_HANDLER_TIMEOUT, the claim still on its way
  await sleep(400); // the claim was made: Fastify runs nothing after the reply that ended
  // Before, the claim stayed in progress (its lease extended) until maxExecution: every retry got 409.
  const retry = await post();
  expect(retry.status).toBe(201);
  expect(charged).toBe(1);
});

/**
 * A store whose marker write (`complete`) waits until `answered` settles, so that the handler answers while
 * the capture holds the timeout's reply; `writing` settles as the write begins.
 */
function slowMarkerStore(answered: Promise<unknown>) {
  const store = memoryStore();
  const complete = store.complete.bind(store);
  let started!: () => void;
  const writing = new Promise<void>((resolve) => {
    started = resolve;
  });
  store.complete = async (...args: Parameters<typeof complete>) => {
    started();
    await answered.catch(() => undefined);
    await sleep(20); // Fastify's reaction to the answer (a rejection's send) comes a few ticks later
    return complete(...args);
  };
  return { store, writing };
}

const lateAnswers = {
  'sends it': (reply: FastifyReply) =>
    reply.code(201).header('x-charge', 'done').send({ charged: 1 }),
  'returns it': (reply: FastifyReply) => {
    reply.code(201).header('x-charge', 'done');
    return { charged: 1 };
  },
  throws: () => {
    throw Object.assign(new Error('declined'), { statusCode: 402 });
  },
} satisfies Record<string, (reply: FastifyReply) => unknown>;

it.each(Object.keys(lateAnswers) as (keyof typeof lateAnswers)[])(
  'answers the timeout the retries are told of when the handler %s while its marker is written',
  async (name) => {
    let answered!: () => void;
    const handlerAnswered = new Promise<void>((resolve) => {
      answered = resolve;
    });
    const { store, writing } = slowMarkerStore(handlerAnswered);
    let charged = 0;
    app = fastify();
    await app.register(idempotencyPlugin, { engine: createIdempotency({ store }) });
    app.post('/charges', { handlerTimeout: 50 }, async (_request, reply) => {
      await writing; // the timeout passed, and its reply waits in the capture for the marker
      charged++;
      try {
        return lateAnswers[name](reply);
      } finally {
        answered();
      }
    });
    const post = await postsOfOneKey(app);

    const first = await post();
    // Before, the handler's answer went out ahead of the held 503 (a 201 with its header, or the throw's
    // 402), while the key kept the timeout's marker: the retry got 409 for a request the client saw succeed.
    expect(first.status).toBe(503);
    expect(first.headers.get('x-charge')).toBeNull();
    expect(((await first.json()) as { code: string }).code).toBe('FST_ERR_HANDLER_TIMEOUT');
    const retry = await post();
    expect(retry.status).toBe(409);
    const problem = (await retry.json()) as { code: string; detail: string };
    expect(problem.code).toBe('response_not_captured');
    expect(problem.detail).toContain('answered by a timeout (status 503)');
    expect(charged).toBe(1);
  },
);

it("lets Fastify's error handling through after the timeout's reply: an onSend hook failing on it", async () => {
  let answered!: () => void;
  const handlerAnswered = new Promise<void>((resolve) => {
    answered = resolve;
  });
  const { store, writing } = slowMarkerStore(handlerAnswered);
  app = fastify();
  await app.register(idempotencyPlugin, { engine: createIdempotency({ store }) });
  // An error handler that sends its own page, which Fastify's state for it then tells from the handler's.
  app.setErrorHandler((error: { statusCode?: number; code?: string }, _request, reply) =>
    reply.code(error.statusCode ?? 500).send({ failed: error.code ?? 'unknown' }),
  );
  // Registered after the plugin: it fails on the timeout's page once the marker is written.
  app.addHook('onSend', async (_request, _reply, payload) => {
    if (typeof payload === 'string' && payload.includes('FST_ERR_HANDLER_TIMEOUT')) {
      throw new Error('the page cannot be signed');
    }
    return payload;
  });
  app.post('/charges', { handlerTimeout: 50 }, async () => {
    await writing;
    answered();
    return new Promise(() => undefined); // runs on for good: only Fastify's error handling answers
  });
  const post = await postsOfOneKey(app);

  const first = await post();
  // Fastify's default page for the onSend hook's error (the next error handler after the app's), not
  // dropped as a late answer of the handler's: dropped, the client got no response.
  expect(first.status).toBe(503);
  expect(((await first.json()) as { message: string }).message).toBe('the page cannot be signed');
  const retry = await post();
  expect(retry.status).toBe(409);
  expect(((await retry.json()) as { code: string }).code).toBe('response_not_captured');
});

/** A promise and the function that settles it. */
function signal(): [Promise<void>, () => void] {
  let settle!: () => void;
  const promise = new Promise<void>((resolve) => {
    settle = resolve;
  });
  return [promise, settle];
}

it.each(Object.keys(lateAnswers) as (keyof typeof lateAnswers)[])(
  "stores the handler's answer when it %s while an async error handler works on the timeout's page",
  async (name) => {
    const [errorHandling, errorHandlerCalled] = signal();
    const [handlerAnswered, answered] = signal();
    let charged = 0;
    let pages = 0;
    app = fastify();
    await app.register(idempotencyPlugin, { engine: createIdempotency({ store: memoryStore() }) });
    // Its page comes after the handler's answer, which Fastify sends first: the client gets the answer.
    app.setErrorHandler(async (_error, _request, reply) => {
      errorHandlerCalled();
      await handlerAnswered;
      await sleep(20);
      pages++;
      return reply.code(503).send({ page: 'timeout' });
    });
    app.post('/charges', { handlerTimeout: 50 }, async (_request, reply) => {
      await errorHandling; // the timeout passed, and the error handler is at work
      charged++;
      try {
        return lateAnswers[name](reply);
      } finally {
        answered();
      }
    });
    const post = await postsOfOneKey(app);

    const first = await post();
    const expected = name === 'throws' ? 402 : 201;
    expect(first.status).toBe(expected);
    const body = await first.text();
    // Before, the answer the client got was kept as the timeout's marker: the retry got 409 saying
    // "answered by a timeout (status 201)", for a request the client saw succeed.
    const retry = await post();
    expect(retry.status).toBe(expected);
    expect(await retry.text()).toBe(body);
    if (name !== 'throws') {
      expect(body).toBe('{"charged":1}');
      expect(first.headers.get('x-charge')).toBe('done');
    }
    expect(charged).toBe(1);
    await sleep(50); // the error handler's page, sent after the answer, is dropped
    expect(pages).toBe(1);
  },
);

it("keeps the marker when an async error handler's page goes out before the handler answers", async () => {
  const [pageSent, sentPage] = signal();
  let charged = 0;
  app = fastify();
  await app.register(idempotencyPlugin, { engine: createIdempotency({ store: memoryStore() }) });
  app.setErrorHandler(async (_error, _request, reply) => {
    await sleep(20);
    reply.raw.once('finish', sentPage);
    return reply.code(504).send({ page: 'timeout' });
  });
  app.post('/charges', { handlerTimeout: 50 }, async (_request, reply) => {
    await pageSent;
    charged++;
    return reply.code(201).send({ charged });
  });
  const post = await postsOfOneKey(app);

  const first = await post();
  expect(first.status).toBe(504);
  expect(await first.json()).toEqual({ page: 'timeout' });
  await sleep(50); // the handler answers after the page: dropped
  const retry = await post();
  expect(retry.status).toBe(409);
  const problem = (await retry.json()) as { code: string; detail: string };
  expect(problem.code).toBe('response_not_captured');
  expect(problem.detail).toContain('answered by a timeout (status 504)');
  expect(charged).toBe(1);
});

const answersInWindow = {
  ...lateAnswers,
  'returns a value with no status': () => ({ charged: 1 }),
} satisfies Record<string, (reply: FastifyReply) => unknown>;

it.each(Object.keys(answersInWindow) as (keyof typeof answersInWindow)[])(
  "keeps the marker when the handler %s while the timeout's page awaits in an onSend hook before the plugin",
  async (name) => {
    const [pageInHook, pageEntered] = signal();
    const [handlerAnswered, answered] = signal();
    let started = 0;
    app = fastify();
    // Registered before the plugin, so it runs before the capture: it holds the timeout's page (which
    // Fastify already sent on) until the handler has answered, and what comes after the page longer.
    let holding = true;
    app.addHook('onSend', async (_request, _reply, payload) => {
      if (!holding) return payload;
      if (typeof payload === 'string' && payload.includes('FST_ERR_HANDLER_TIMEOUT')) {
        pageEntered();
        await handlerAnswered;
        await sleep(20); // Fastify's send of a returned value or a throw comes a few ticks later
      } else {
        await sleep(100);
      }
      return payload;
    });
    await app.register(idempotencyPlugin, { engine: createIdempotency({ store: memoryStore() }) });
    app.post('/charges', { handlerTimeout: 50 }, async (_request, reply) => {
      started++;
      await pageInHook;
      try {
        return answersInWindow[name](reply);
      } finally {
        answered();
      }
    });
    const post = await postsOfOneKey(app);

    const first = await post();
    // The page went out first (with the status the handler set meanwhile, as without the plugin).
    expect(((await first.json()) as { code: string }).code).toBe('FST_ERR_HANDLER_TIMEOUT');
    await sleep(150);
    holding = false;
    // Before, the answer was taken for one overtaking the page, which reached the capture first and was
    // stored as the handler's answer: replayed (a 201 or 402 with the timeout's page), or, as a 503,
    // released while the handler ran on: the retry ran it again.
    const retry = await post();
    expect(retry.status).toBe(409);
    expect(((await retry.json()) as { code: string }).code).toBe('response_not_captured');
    expect(started).toBe(1);
  },
);

it("stores an answer that only carries the timeout's code: an upstream's page the handler passes on", async () => {
  let runs = 0;
  app = fastify();
  await app.register(idempotencyPlugin, { engine: createIdempotency({ store: memoryStore() }) });
  app.post('/charges', async (_request, reply) => {
    runs++;
    return reply.code(200).send({ code: 'FST_ERR_HANDLER_TIMEOUT', runs });
  });
  const post = await postsOfOneKey(app);

  const first = await post();
  expect(first.status).toBe(200);
  // Taken for Fastify's timeout (by its code alone), it ran on the stand-in and was kept as a marker.
  const retry = await post();
  expect(retry.status).toBe(200);
  expect(await retry.json()).toEqual({ code: 'FST_ERR_HANDLER_TIMEOUT', runs: 1 });
  expect(runs).toBe(1);
});

it("keeps the marker when the timeout's error handler hijacks the reply and writes its page itself", async () => {
  let started = 0;
  app = fastify();
  await app.register(idempotencyPlugin, { engine: createIdempotency({ store: memoryStore() }) });
  app.setErrorHandler((_error, _request, reply) => {
    reply.hijack();
    reply.raw.writeHead(504, { 'content-type': 'text/plain' });
    reply.raw.end('gateway timeout');
  });
  app.post('/charges', { handlerTimeout: 50 }, async (_request, reply) => {
    started++;
    if (started === 1) await sleep(150); // runs on past the page, and charges
    return reply.code(201).send({ started });
  });
  const post = await postsOfOneKey(app);

  const first = await post();
  expect(first.status).toBe(504);
  expect(await first.text()).toBe('gateway timeout');
  // Before, the page written past `onSend` released the key as an uncaptured 5xx: the retry ran the
  // handler again beside the first.
  const retry = await post();
  expect(retry.status).toBe(409);
  const problem = (await retry.json()) as { code: string; detail: string };
  expect(problem.code).toBe('response_not_captured');
  expect(problem.detail).toContain('answered by a timeout (status 504)');
  await sleep(200);
  expect(started).toBe(1);
});

it("keeps the marker when the timeout's error handler sends its 503 through a reply kept from onRequest", async () => {
  let started = 0;
  let charged = 0;
  app = fastify();
  await app.register(idempotencyPlugin, { engine: createIdempotency({ store: memoryStore() }) });
  // A request-context helper that keeps the reply from `onRequest`, which the error handler answers
  // through instead of the stand-in it is given.
  const kept = new WeakMap<FastifyRequest, FastifyReply>();
  app.addHook('onRequest', async (request, reply) => {
    kept.set(request, reply);
  });
  app.setErrorHandler((error: { statusCode?: number }, request, reply) => {
    (kept.get(request) ?? reply).code(error.statusCode ?? 500).send({ page: 'try again later' });
  });
  app.post('/charges', { handlerTimeout: 50 }, async (_request, reply) => {
    started++;
    if (started === 1) await sleep(150); // runs on past the page, and charges
    charged++;
    return reply.code(201).send({ charged });
  });
  const post = await postsOfOneKey(app);

  const first = await post();
  expect(first.status).toBe(503);
  expect(await first.json()).toEqual({ page: 'try again later' });
  // Before, the page was taken for the handler's answer overtaking the timeout's: a 5xx, it released the
  // key, and the retry ran the handler again beside the first (a second charge).
  const retry = await post();
  expect(retry.status).toBe(409);
  const problem = (await retry.json()) as { code: string; detail: string };
  expect(problem.code).toBe('response_not_captured');
  expect(problem.detail).toContain('answered by a timeout (status 503)');
  await sleep(200);
  expect(started).toBe(1);
  expect(charged).toBe(1);
});

it('keeps the marker when the handler itself sends a 5xx after its timeout and runs on', async () => {
  const [errorHandling, errorHandlerCalled] = signal();
  const [handlerAnswered, answered] = signal();
  let started = 0;
  let charged = 0;
  app = fastify();
  await app.register(idempotencyPlugin, { engine: createIdempotency({ store: memoryStore() }) });
  // Its page comes after the handler's answer, which goes out first.
  app.setErrorHandler(async (_error, _request, reply) => {
    errorHandlerCalled();
    await handlerAnswered;
    await sleep(20);
    return reply.code(503).send({ page: 'timeout' });
  });
  app.post('/charges', { handlerTimeout: 50 }, async (_request, reply) => {
    started++;
    await errorHandling; // the timeout passed, and the error handler is at work
    reply.code(502).send({ upstream: 'unsure' });
    answered();
    await sleep(50); // runs on after its answer, and charges
    charged++;
    return reply;
  });
  const post = await postsOfOneKey(app);

  const first = await post();
  expect(first.status).toBe(502);
  expect(await first.json()).toEqual({ upstream: 'unsure' });
  // The handler may charge after its own 5xx: released, the retry ran it again beside the first.
  const retry = await post();
  expect(retry.status).toBe(409);
  expect(((await retry.json()) as { code: string }).code).toBe('response_not_captured');
  await sleep(100);
  expect(started).toBe(1);
  expect(charged).toBe(1);
});

it('keeps the marker when the handler throws a 5xx after its timeout, ahead of the error page', async () => {
  const [errorHandling, errorHandlerCalled] = signal();
  const [handlerAnswered, answered] = signal();
  let started = 0;
  app = fastify();
  await app.register(idempotencyPlugin, { engine: createIdempotency({ store: memoryStore() }) });
  app.setErrorHandler(async (error: { statusCode?: number }, _request, reply) => {
    errorHandlerCalled();
    if (error.statusCode === 503) {
      await handlerAnswered; // the timeout's page waits: the throw's page goes out first
      await sleep(20);
    }
    return reply.code(error.statusCode ?? 500).send({ page: error.statusCode ?? 500 });
  });
  app.post('/charges', { handlerTimeout: 50 }, async () => {
    started++;
    await errorHandling;
    answered();
    throw new Error('the ledger write failed after the charge');
  });
  const post = await postsOfOneKey(app);

  const first = await post();
  expect(first.status).toBe(500);
  // A throw after the timeout is no longer taken as proof that nothing happened: the retry is told the
  // outcome is unknown instead of running the handler again.
  const retry = await post();
  expect(retry.status).toBe(409);
  const problem = (await retry.json()) as { code: string; detail: string };
  expect(problem.code).toBe('response_not_captured');
  expect(problem.detail).toContain('answered by a timeout (status 500)');
  expect(started).toBe(1);
});

it('keeps the marker for a 5xx page sent through a kept reply under storeServerErrors: true', async () => {
  let started = 0;
  let charged = 0;
  app = fastify();
  await app.register(idempotencyPlugin, {
    engine: createIdempotency({ store: memoryStore() }),
    storeServerErrors: true,
  });
  const kept = new WeakMap<FastifyRequest, FastifyReply>();
  app.addHook('onRequest', async (request, reply) => {
    kept.set(request, reply);
  });
  app.setErrorHandler((error: { statusCode?: number }, request, reply) => {
    (kept.get(request) ?? reply).code(error.statusCode ?? 500).send({ page: 'try again later' });
  });
  app.post('/charges', { handlerTimeout: 50 }, async (_request, reply) => {
    started++;
    if (started === 1) await sleep(150); // runs on past the page, and charges
    charged++;
    return reply.code(201).send({ charged });
  });
  const post = await postsOfOneKey(app);

  const first = await post();
  expect(first.status).toBe(503);
  // Before, the page was stored as the handler's answer: every retry got the replayed 503 "try again
  // later" while the handler had charged (a client trying again with a new key charged twice).
  const retry = await post();
  expect(retry.status).toBe(409);
  expect(retry.headers.get('idempotent-replayed')).toBeNull();
  const problem = (await retry.json()) as { code: string; detail: string };
  expect(problem.code).toBe('response_not_captured');
  expect(problem.detail).toContain('answered by a timeout (status 503)');
  await sleep(200);
  expect(started).toBe(1);
  expect(charged).toBe(1);
});
