/**
 * Hono hands only `Error`s to `onError`: a handler that throws anything else (`throw { code: 'declined' }`)
 * rejects through the middleware's `next`. No response was produced, so the key is released, as for a
 * thrown error: the retry runs the handler again instead of getting 409 while the process lives.
 */
import { randomUUID } from 'node:crypto';
import { Hono } from 'hono';
import { expect, it } from 'vitest';
import { idempotency } from '../../../src/hono/index.js';
import { memoryStore } from '../../../src/index.js';

it('releases the key when the handler throws a value that is not an Error', async () => {
  let runs = 0;
  const app = new Hono();
  app.use(idempotency({ store: memoryStore() }));
  app.post('/charges', (c) => {
    runs++;
    if (runs === 1) throw { code: 'card_declined' };
    return c.json({ charged: true }, 201);
  });
  const key = randomUUID();
  const post = () =>
    app.fetch(
      new Request('http://api.test/charges', {
        method: 'POST',
        headers: { 'idempotency-key': key },
      }),
    );
  await expect(post()).rejects.toEqual({ code: 'card_declined' });
  // Before, the claim stayed in progress (its lease extended): 409 in_progress on every retry.
  const retry = await post();
  expect(retry.status).toBe(201);
  expect(await retry.json()).toEqual({ charged: true });
  expect(runs).toBe(2);
});
