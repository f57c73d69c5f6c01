/**
 * A timeout mounted before the Hono layer (`hono/timeout`, or any middleware racing `next()`) answers
 * while the handler runs on; Hono then drops the handler's answer. Judged by the timeout's 504, the key
 * was released: the retry after the handler ended ran it, and its charge, a second time. The handler's
 * own answer is now stored and replayed to the retry (`src/hono/outer-answer.ts`), as Fastify's
 * `handlerTimeout` and Express's `connect-timeout` are handled, while a handler that throws (no timeout)
 * still releases its key on the 500 Hono renders. On `@hono/node-server`.
 */
import { randomUUID } from 'node:crypto';
import { type Context, Hono, type MiddlewareHandler } from 'hono';
import { HTTPException } from 'hono/http-exception';
import { timeout } from 'hono/timeout';
import { expect, it } from 'vitest';
import { idempotency } from '../../../src/hono/index.js';
import { memoryStore } from '../../../src/index.js';
import { listenFetchForTest } from '../../helpers/listen-fetch.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

// A timeout written by hand, as many are: it answers itself once the race is lost, no exception thrown.
const raceTimeout =
  (ms: number): MiddlewareHandler =>
  async (c, next) => {
    const late = Symbol('late');
    const won = await Promise.race([next(), sleep(ms).then(() => late)]);
    return won === late ? c.json({ error: 'timed out' }, 503) : undefined;
  };

interface Run {
  first: number;
  during: { status: number; code: string | undefined };
  after: { status: number; body: unknown };
  runs: number;
}

/**
 * A first request the timeout answers, a retry while the handler runs on, and one after it ended: their
 * statuses and bodies, and how many times the handler ran. `outer`, when given, is mounted before all;
 * `wait` is what the handler waits for before it answers (200 ms, well past the timeouts' 50).
 */
async function timedOut(
  before: MiddlewareHandler,
  handler: (c: Context) => Response | Promise<Response>,
  outer?: MiddlewareHandler,
  wait: () => Promise<unknown> = () => sleep(200),
): Promise<Run> {
  let runs = 0;
  let ended!: () => void;
  const handlerEnded = new Promise<void>((resolve) => {
    ended = resolve;
  });
  const app = new Hono();
  if (outer !== undefined) app.use(outer);
  app.post('/charges', before, idempotency({ store: memoryStore() }), async (c) => {
    runs++; // the charge
    try {
      await wait();
      return await handler(c);
    } finally {
      ended();
    }
  });
  const base = await listenFetchForTest(app.fetch);
  const key = randomUUID();
  const send = () =>
    fetch(`${base}/charges`, { method: 'POST', headers: { 'idempotency-key': key } });
  const first = await send();
  await first.arrayBuffer();
  const during = await send();
  const problem = (await during.json()) as { code?: string };
  await handlerEnded;
  await sleep(30); // the layer stores the outcome once `next()` has settled
  const after = await send();
  const text = await after.text();
  return {
    first: first.status,
    during: { status: during.status, code: problem.code },
    after: { status: after.status, body: text.startsWith('{') ? JSON.parse(text) : text },
    runs,
  };
}

// The handler's answer built as a `Response` of its own, not through a `c` helper: Hono drops it unseen.
const rawCharge = () =>
  new Response('{"charged":true}', {
    status: 201,
    headers: { 'content-type': 'application/json' },
  });

/**
 * The key kept the timeout's marker: a retry while the handler ran got 409 in_progress, every retry after
 * it 409 response_not_captured saying a timeout answered, and the handler ran once.
 */
function expectTimeoutMarker(result: Run): void {
  expect(result.during).toEqual({ status: 409, code: 'in_progress' });
  expect(result.after.status).toBe(409);
  expect(result.after.body).toMatchObject({
    code: 'response_not_captured',
    detail: expect.stringContaining('answered by a timeout (status 504)'),
  });
  expect(result.runs).toBe(1);
}

it.each([
  ['hono/timeout', timeout(50), 504],
  [
    'hono/timeout with its own exception',
    timeout(50, () => new HTTPException(503, { message: 'Try again' })),
    503,
  ],
  ['a hand-written Promise.race timeout', raceTimeout(50), 503],
])('replays the answer the handler gave after %s answered', async (_, before, status) => {
  const result = await timedOut(before, (c) => c.json({ charged: true }, 201));
  expect(result.first).toBe(status);
  expect(result.during).toEqual({ status: 409, code: 'in_progress' });
  // Before: the timeout's answer released the key, and the retry ran the handler a second time.
  expect(result.after).toEqual({ status: 201, body: { charged: true } });
  expect(result.runs).toBe(1);
});

it('replays a c.text answer given with c.status after hono/timeout answered', async () => {
  const result = await timedOut(timeout(50), (c) => {
    c.status(202);
    return c.text('accepted');
  });
  expect(result.after).toEqual({ status: 202, body: 'accepted' });
  expect(result.runs).toBe(1);
});

it('releases the key when the handler answered a 5xx after the timeout', async () => {
  const result = await timedOut(timeout(50), (c) => c.json({ error: 'upstream' }, 502));
  expect(result.first).toBe(504);
  // Run again (and timed out again), as a 502 answered in time would have been.
  expect(result.after.status).toBe(504);
  expect(result.runs).toBe(2);
});

it('releases the key when the handler throws after the timeout', async () => {
  const result = await timedOut(timeout(50), () => {
    throw new Error('card network down');
  });
  expect(result.first).toBe(504);
  expect(result.after.status).toBe(504);
  expect(result.runs).toBe(2);
});

it('still releases the key when the handler throws an Error rendered as 500 (no timeout)', async () => {
  let runs = 0;
  const app = new Hono();
  app.post('/charges', timeout(5_000), idempotency({ store: memoryStore() }), () => {
    runs++;
    throw new Error('card network down');
  });
  const base = await listenFetchForTest(app.fetch);
  const key = randomUUID();
  const send = () =>
    fetch(`${base}/charges`, { method: 'POST', headers: { 'idempotency-key': key } });
  const first = await send();
  await first.arrayBuffer();
  const retry = await send();
  await retry.arrayBuffer();
  expect([first.status, retry.status]).toEqual([500, 500]);
  expect(runs).toBe(2);
});

it('still stores the answer a handler gave within the timeout', async () => {
  let runs = 0;
  const app = new Hono();
  app.post('/charges', timeout(5_000), idempotency({ store: memoryStore() }), (c) => {
    runs++;
    return c.json({ charged: runs }, 201);
  });
  const base = await listenFetchForTest(app.fetch);
  const key = randomUUID();
  const send = () =>
    fetch(`${base}/charges`, { method: 'POST', headers: { 'idempotency-key': key } });
  await (await send()).arrayBuffer();
  const retry = await send();
  expect(retry.status).toBe(201);
  expect(await retry.json()).toEqual({ charged: 1 });
  expect(runs).toBe(1);
});

// A middleware before the timeout that answers again once the timeout answered (a 202 telling the client
// to come back): Hono ignores it, and the client gets the 504.
const answersAgain: MiddlewareHandler = async (c, next) => {
  await next();
  return c.res.status === 504 ? c.json({ status: 'pending' }, 202) : undefined;
};

it("never stores an answer a middleware before the timeout gave after it, as the handler's", async () => {
  const result = await timedOut(timeout(50), rawCharge, answersAgain);
  expect(result.first).toBe(504);
  // Before, that 202 (which no client got) was stored as the handler's answer and replayed to every
  // retry; told apart from the handler, it then left the key to the timeout's 504, which released it,
  // and the retry charged a second time. The handler's own `Response` cannot be seen: the key keeps the
  // timeout's marker, and no retry runs the handler again.
  expectTimeoutMarker(result);
});

it("stores the handler's helper answer, not one a middleware before the timeout gave before it", async () => {
  const result = await timedOut(timeout(50), (c) => c.json({ charged: true }, 201), answersAgain);
  expect(result.first).toBe(504);
  expect(result.after).toEqual({ status: 201, body: { charged: true } });
  expect(result.runs).toBe(1);
});

it("stores the handler's answer given from a timer due at the very moment of the timeout's", async () => {
  // Two timers of one length set together fire in one pass of the event loop, one task each: the
  // timeout's answers (and Hono unwinds the middlewares before it), then the handler's wakes it.
  let handlerWakes!: Promise<unknown>;
  const timeoutWithTwin: MiddlewareHandler = async (_c, next) => {
    const late = sleep(50).then(() => {
      throw new HTTPException(504);
    });
    handlerWakes = sleep(50);
    await Promise.race([next(), late]);
  };
  const result = await timedOut(
    timeoutWithTwin,
    (c) => c.json({ charged: true }, 201),
    answersAgain,
    () => handlerWakes,
  );
  expect(result.first).toBe(504);
  // Taken for the outer middleware's answer (same turn of the event loop), the handler's was not stored:
  // the 504 released the key and the retry charged a second time.
  expect(result.after).toEqual({ status: 201, body: { charged: true } });
  expect(result.runs).toBe(1);
});

it("stores the handler's answer when a middleware under the layer answers again after it (no timeout)", async () => {
  // Hono ignores that second answer (the context is finalized), as it would without the layer.
  let runs = 0;
  const app = new Hono();
  app.post(
    '/charges',
    idempotency({ store: memoryStore() }),
    async (c, next) => {
      await next();
      return c.json({ status: 'other' }, 202);
    },
    (c) => {
      runs++;
      return c.json({ charged: runs }, 201);
    },
  );
  const base = await listenFetchForTest(app.fetch);
  const send = () =>
    fetch(`${base}/charges`, { method: 'POST', headers: { 'idempotency-key': 'k-inner' } });
  const first = await send();
  expect(first.status).toBe(201);
  expect(await first.json()).toEqual({ charged: 1 });
  // The first fix of an outer answer after a timeout took this one for it: 409 response_not_captured.
  const retry = await send();
  expect(retry.status).toBe(201);
  expect(retry.headers.get('idempotent-replayed')).toBe('true');
  expect(await retry.json()).toEqual({ charged: 1 });
  expect(runs).toBe(1);
});

it.each([
  ['a Response it built itself', rawCharge],
  ['nothing', () => undefined as unknown as Response],
])('keeps a marker when the handler answers %s after hono/timeout answered', async (_, handler) => {
  const result = await timedOut(timeout(50), handler);
  expect(result.first).toBe(504);
  // Before, the timeout's 504 released the key (that answer cannot be seen), and the retry charged a
  // second time. The handler ran: every retry gets 409, its outcome unknown.
  expectTimeoutMarker(result);
});
