/**
 * A value that is not an `Error` thrown after the Hono handler answered: Hono hands only `Error`s to
 * onError, so it comes straight out of the layer's `next()`. The layer released the key without looking at
 * the answer already given, and the retry ran the handler, and its charge, a second time; it now judges
 * the key by that answer, as for an `Error` after the answer
 * (`test/integration/http/hono-error-after-answer.test.ts`): a 2xx–4xx answer keeps the
 * `response_not_captured` marker, a 5xx one releases the key, and a throw before any answer still releases.
 */
import type { Context, MiddlewareHandler } from 'hono';
import { expect, it } from 'vitest';
import { idempotency } from '../../../src/hono/index.js';
import { memoryStore } from '../../../src/index.js';
import { quietHono, sameKeyTwice } from '../../helpers/hono-same-key.js';

// A middleware between the layer and the handler that fails, with a plain object, once the handler has
// returned (an audit client that rejects with its error body).
const auditFails: MiddlewareHandler = async (_c, next) => {
  await next();
  throw { code: 'audit_down' };
};

it('keeps the marker when a middleware after the layer throws a non-Error once the handler answered', async () => {
  let runs = 0;
  const app = quietHono();
  app.post('/charges', idempotency({ store: memoryStore() }), auditFails, (c: Context) => {
    runs++; // the charge
    return c.json({ charged: true }, 201);
  });
  const [first, retry] = await sameKeyTwice(app);
  expect(first).toEqual({ thrown: { code: 'audit_down' } });
  // Before: the key was released, the retry charged again (runs: 2) and threw the same.
  expect(retry).toEqual({ status: 409, code: 'response_not_captured' });
  expect(runs).toBe(1);
});

it('keeps the marker when a toJSON throws a string inside c.json', async () => {
  let runs = 0;
  const app = quietHono();
  app.post('/charges', idempotency({ store: memoryStore() }), (c) => {
    runs++;
    const receipt = {
      toJSON() {
        throw 'receipt unavailable';
      },
    };
    return c.json({ charged: true, receipt }, 201);
  });
  const [first, retry] = await sameKeyTwice(app);
  expect(first).toEqual({ thrown: 'receipt unavailable' });
  expect(retry).toEqual({ status: 409, code: 'response_not_captured' });
  expect(runs).toBe(1);
});

it('releases the key when the answer a non-Error followed was a 5xx', async () => {
  let runs = 0;
  const app = quietHono();
  app.post('/charges', idempotency({ store: memoryStore() }), auditFails, (c: Context) => {
    runs++;
    return c.json({ error: 'upstream' }, 502);
  });
  const [, retry] = await sameKeyTwice(app);
  expect(retry).toEqual({ thrown: { code: 'audit_down' } });
  expect(runs).toBe(2);
});

it('releases the key when the handler throws a non-Error before it answers, under such a middleware', async () => {
  let runs = 0;
  const app = quietHono();
  app.post('/charges', idempotency({ store: memoryStore() }), auditFails, () => {
    runs++;
    throw { code: 'card_network_down' };
  });
  const [first, retry] = await sameKeyTwice(app);
  expect(first).toEqual({ thrown: { code: 'card_network_down' } });
  expect(retry).toEqual({ thrown: { code: 'card_network_down' } });
  expect(runs).toBe(2);
});
