/**
 * `connect-timeout` mounted before the Express middleware answers 503 while the handler runs on (it only
 * marks the request `req.timedout` and passes an error on). Judged by that 503, the key was released, and
 * the client's retry ran the handler beside the first: a second charge. The middleware now reads such an
 * answer as Fastify's `handlerTimeout` is read: not the handler's outcome, so the key keeps a
 * `response_not_captured` marker and no retry runs it again. A route whose handler answers in time is
 * stored as usual. On Express 5 and 4, over real sockets.
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import timeout from 'connect-timeout';
import express from 'express';
import express4 from 'express4';
import { describe, expect, it } from 'vitest';
import { idempotency } from '../../../src/express/index.js';
import { memoryStore, type Store } from '../../../src/index.js';
import { listenExpress } from '../../helpers/listen-express.js';
import { postWithKey } from '../../helpers/post-with-key.js';

type Problem = { code?: string; detail?: string };

/** The `detail` every retry of a key a 503 timeout answered gets (not "went around the capture"). */
const TIMED_OUT_DETAIL =
  "The first request was answered by a timeout (status 503) while its handler ran on, so the handler's own response could not be kept and its outcome is unknown; it will not be run again for this key. Check whether the operation took effect before sending it again with a new key.";

describe.each([
  ['Express 5', express],
  ['Express 4', express4 as unknown as typeof express],
])('%s behind connect-timeout', (_name, framework) => {
  async function start(handlerMs: number) {
    const runs = new Map<string, number>();
    const app = framework();
    app.use(timeout('100ms'));
    app.use(idempotency({ store: memoryStore() }));
    app.post('/charges', async (req, res) => {
      const key = String(req.headers['idempotency-key']);
      runs.set(key, (runs.get(key) ?? 0) + 1);
      await sleep(handlerMs); // the charge
      // connect-timeout's own advice: answer only if the request has not timed out.
      if (!(req as { timedout?: boolean }).timedout) res.status(201).json({ charged: true });
    });
    // The app's error handler answers the timeout's error (a 503 with `status`).
    app.use(
      (
        error: Error & { status?: number },
        _req: express.Request,
        res: express.Response,
        _next: express.NextFunction,
      ) => {
        res.status(error.status ?? 500).json({ error: error.message });
      },
    );
    return { base: await listenExpress(app), runs };
  }

  it('keeps a response_not_captured marker for the timeout answer: the retry never charges again', async () => {
    const { base, runs } = await start(300);
    const key = randomUUID();
    const first = await postWithKey<Problem>(`${base}/charges`, key, '{}');
    expect(first.status).toBe(503);
    // While the handler still runs, and once it has ended: never a second run.
    const during = await postWithKey<Problem>(`${base}/charges`, key, '{}');
    expect(during.status).toBe(409);
    await sleep(400);
    const after = await postWithKey<Problem>(`${base}/charges`, key, '{}');
    expect(after.status).toBe(409);
    expect(after.body.code).toBe('response_not_captured');
    // Before, the detail said the response went around the capture: it was a timeout's answer.
    expect(after.body.detail).toBe(TIMED_OUT_DETAIL);
    expect(runs.get(key)).toBe(1);
  });

  it('stores the answer of a handler that answers in time, as usual', async () => {
    const { base, runs } = await start(5);
    const key = randomUUID();
    const first = await postWithKey<{ charged?: boolean }>(`${base}/charges`, key, '{}');
    expect(first.status).toBe(201);
    const retry = await postWithKey<{ charged?: boolean }>(`${base}/charges`, key, '{}');
    expect(retry.status).toBe(201);
    expect(retry.replayed).toBe('true');
    expect(runs.get(key)).toBe(1);
  });

  it('stores the handler answer given after req.timedout when connect-timeout was told not to respond', async () => {
    const runs = new Map<string, number>();
    const app = framework();
    app.use(timeout('50ms', { respond: false }));
    app.use(idempotency({ store: memoryStore() }));
    app.post('/charges', async (req, res) => {
      const key = String(req.headers['idempotency-key']);
      runs.set(key, (runs.get(key) ?? 0) + 1);
      await sleep(150);
      res.status(201).json({ charged: true });
    });
    const base = await listenExpress(app);
    const key = randomUUID();
    const first = await postWithKey<{ charged?: boolean }>(`${base}/charges`, key, '{}');
    expect(first.status).toBe(201);
    const retry = await postWithKey<{ charged?: boolean }>(`${base}/charges`, key, '{}');
    expect(retry.status).toBe(201);
    expect(retry.replayed).toBe('true');
    expect(retry.body).toEqual({ charged: true });
    expect(runs.get(key)).toBe(1);
  });
});

it('releases the key when connect-timeout answered while the claim was in flight: the handler never ran', async () => {
  // A store whose first claim is slower than the timeout.
  const inner = memoryStore();
  let slow = true;
  const store = new Proxy(inner, {
    get(target, name, receiver) {
      const value = Reflect.get(target, name, receiver);
      if (name === 'claim' && typeof value === 'function') {
        return async (...args: unknown[]) => {
          if (slow) {
            slow = false;
            await sleep(120);
          }
          return value.apply(target, args);
        };
      }
      return typeof value === 'function' ? value.bind(target) : value;
    },
  }) as Store;
  let runs = 0;
  const app = express();
  app.use(timeout('50ms'));
  app.use(idempotency({ store, leaseMs: 300 }));
  app.post('/charges', async (req, res) => {
    runs++;
    if (!(req as { timedout?: boolean }).timedout) res.status(201).json({ charged: true });
  });
  app.use(
    (
      error: Error & { status?: number },
      _req: express.Request,
      res: express.Response,
      _next: express.NextFunction,
    ) => {
      if (!res.headersSent) res.status(error.status ?? 500).json({ error: error.message });
    },
  );
  const base = await listenExpress(app);
  const key = randomUUID();
  const first = await postWithKey<unknown>(`${base}/charges`, key, '{}');
  expect(first.status).toBe(503);
  expect(runs).toBe(0);
  // Held, the claim's lease was extended while the process lived: every retry got 409 in_progress.
  await sleep(600);
  const retry = await postWithKey<{ charged?: boolean }>(`${base}/charges`, key, '{}');
  expect(retry.status).toBe(201);
  expect(retry.body).toEqual({ charged: true });
  expect(runs).toBe(1);
});

it('keeps a marker for a timeout middleware that marks req.timedout and answers from its own timer', async () => {
  // Modelled on connect-timeout, without its listener on the request: the 503 is not the handler's.
  let runs = 0;
  const app = express();
  app.use((req, res, next) => {
    setTimeout(() => {
      (req as { timedout?: boolean }).timedout = true;
      if (!res.headersSent) res.status(503).json({ error: 'timed out' });
    }, 50);
    next();
  });
  app.use(idempotency({ store: memoryStore() }));
  app.post('/charges', async (req, res) => {
    runs++;
    await sleep(150);
    if (!(req as { timedout?: boolean }).timedout) res.status(201).json({ charged: true });
  });
  const base = await listenExpress(app);
  const key = randomUUID();
  const first = await postWithKey<unknown>(`${base}/charges`, key, '{}');
  expect(first.status).toBe(503);
  await sleep(300);
  const retry = await postWithKey<Problem>(`${base}/charges`, key, '{}');
  expect(retry.status).toBe(409);
  expect(retry.body.code).toBe('response_not_captured');
  expect(retry.body.detail).toBe(TIMED_OUT_DETAIL);
  expect(runs).toBe(1);
});

it('runs the handler when a middleware before the layer flushed the head of a streamed answer', async () => {
  let runs = 0;
  const app = express();
  app.use((_req, res, next) => {
    res.setHeader('content-type', 'text/plain');
    res.flushHeaders();
    next();
  });
  app.use(idempotency({ store: memoryStore() }));
  app.post('/stream', (_req, res) => {
    runs++;
    res.end('done');
  });
  const base = await listenExpress(app);
  const response = await fetch(`${base}/stream`, {
    method: 'POST',
    headers: { 'idempotency-key': randomUUID() },
    signal: AbortSignal.timeout(2000),
  });
  expect(await response.text()).toBe('done');
  expect(runs).toBe(1);
});
