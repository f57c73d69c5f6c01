/**
 * An error after the Hono handler answered: `c.json` that cannot serialize its object (a BigInt, a
 * circular object) when the handler calls it with its answer, or a middleware between the layer and the
 * handler that throws once the handler has returned (after `await next()`). Hono renders the error through
 * onError (a 500), and judged by that 500 the key was released: the retry ran the handler, and its charge,
 * a second time. The key is now judged by the answer the handler gave, as with Express and Fastify: one
 * that would have been stored (a 201) keeps a `response_not_captured` marker, so every retry is answered
 * 409 and never run again; a 5xx answer releases the key as it would have. A handler that throws before it
 * answers still releases its key, and a middleware before the layer that throws after it finds the answer
 * stored already. On `@hono/node-server`.
 */
import { randomUUID } from 'node:crypto';
import { type Context, Hono, type MiddlewareHandler } from 'hono';
import { expect, it } from 'vitest';
import { idempotency } from '../../../src/hono/index.js';
import { memoryStore } from '../../../src/index.js';
import { listenFetchForTest } from '../../helpers/listen-fetch.js';

const circular = () => {
  const order: Record<string, unknown> = { id: 'ord_1' };
  order.self = order;
  return order;
};

// A middleware that fails once the handler has returned (an audit log, a response validator).
const failsAfter: MiddlewareHandler = async (_c, next) => {
  await next();
  throw new Error('audit log unavailable');
};

/** Two requests with the same key: the statuses, the retry's problem type and the handler's runs. */
async function twice(
  route: (app: Hono, idem: MiddlewareHandler, run: () => void) => void,
): Promise<{ first: number; retry: number; code: string | undefined; runs: number }> {
  let runs = 0;
  const app = new Hono();
  route(app, idempotency({ store: memoryStore() }), () => {
    runs++;
  });
  const base = await listenFetchForTest(app.fetch);
  const key = randomUUID();
  const send = () =>
    fetch(`${base}/charges`, { method: 'POST', headers: { 'idempotency-key': key } });
  const first = await send();
  await first.arrayBuffer();
  const retry = await send();
  const text = await retry.text();
  const body = (text.startsWith('{') ? JSON.parse(text) : {}) as { code?: string };
  return { first: first.status, retry: retry.status, code: body.code, runs };
}

it.each([
  ['a BigInt', () => ({ amount: 10n })],
  ['a circular object', circular],
])(
  'keeps the marker when c.json cannot serialize %s the handler answered with',
  async (_, value) => {
    const result = await twice((app, idem, run) => {
      app.post('/charges', idem, (c) => {
        run(); // the charge
        return c.json(value() as never, 201);
      });
    });
    expect(result.first).toBe(500);
    // Before: 500 and a second charge.
    expect(result.retry).toBe(409);
    expect(result.code).toBe('response_not_captured');
    expect(result.runs).toBe(1);
  },
);

it('keeps the marker when c.json throws on the status c.status set', async () => {
  const result = await twice((app, idem, run) => {
    app.post('/charges', idem, (c) => {
      run();
      c.status(201);
      return c.json({ amount: 10n } as never);
    });
  });
  expect(result.retry).toBe(409);
  expect(result.runs).toBe(1);
});

it('keeps the marker when a middleware after the layer throws once the handler answered', async () => {
  const result = await twice((app, idem, run) => {
    app.post('/charges', idem, failsAfter, (c: Context) => {
      run();
      return c.json({ charged: true }, 201);
    });
  });
  expect(result.first).toBe(500);
  expect(result.retry).toBe(409);
  expect(result.code).toBe('response_not_captured');
  expect(result.runs).toBe(1);
});

it('releases the key when the lost answer was a 5xx', async () => {
  const result = await twice((app, idem, run) => {
    app.post('/charges', idem, failsAfter, (c: Context) => {
      run();
      return c.json({ error: 'upstream' }, 502);
    });
  });
  expect(result.retry).toBe(500);
  expect(result.runs).toBe(2);
});

it('releases the key when the handler throws before it answers', async () => {
  const result = await twice((app, idem, run) => {
    app.post('/charges', idem, failsAfter, () => {
      run();
      throw new Error('card network down');
    });
  });
  expect(result.first).toBe(500);
  expect(result.retry).toBe(500);
  expect(result.runs).toBe(2);
});

it('replays the stored answer when a middleware before the layer throws after it', async () => {
  let failures = 0;
  // Fails the first request only: the retry goes through it too.
  const failsOnce: MiddlewareHandler = async (_c, next) => {
    await next();
    if (failures++ === 0) throw new Error('audit log unavailable');
  };
  const result = await twice((app, idem, run) => {
    app.post('/charges', failsOnce, idem, (c: Context) => {
      run();
      return c.json({ charged: true }, 201);
    });
  });
  expect(result.first).toBe(500);
  expect(result.retry).toBe(201);
  expect(result.runs).toBe(1);
});

it('keeps the marker when the handler catches the c.json error and answers something else', async () => {
  const result = await twice((app, idem, run) => {
    app.post('/charges', idem, (c) => {
      run();
      try {
        return c.json({ amount: 10n } as never, 201);
      } catch {
        return c.json({ error: 'cannot render the charge' }, 500);
      }
    });
  });
  expect(result.first).toBe(500);
  expect(result.retry).toBe(409);
  expect(result.runs).toBe(1);
});
