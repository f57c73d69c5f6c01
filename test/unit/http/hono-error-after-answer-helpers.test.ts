/**
 * Every response helper the Hono layer watches, failing while it makes the handler's answer: the key keeps
 * the `response_not_captured` marker (retries 409, the charge never runs again), as
 * `test/integration/http/hono-error-after-answer.test.ts` shows for `c.json`. The synchronous helpers fail
 * here on a header value the handler took from elsewhere (a newline in it: `Headers` throws a TypeError).
 * `c.html` given a promise or JSX renders asynchronously, so its failure is a rejection after the helper
 * returned: the layer released the key on it (500, then 500 and a second charge); it now waits for it.
 */
import type { Context } from 'hono';
import { jsx } from 'hono/jsx';
import type { HtmlEscapedString } from 'hono/utils/html';
import { expect, it } from 'vitest';
import { idempotency } from '../../../src/hono/index.js';
import { memoryStore } from '../../../src/index.js';
import { quietHono, sameKeyTwice } from '../../helpers/hono-same-key.js';

// A receipt id from the card network with a line break in it: not a valid header value.
const receipt = { 'x-receipt': 'rcpt_1\nrcpt_2' };

// A page whose render fails after the handler returned it.
const renderFails = () => Promise.reject(new Error('template unavailable'));
function Receipt(): never {
  throw new Error('template unavailable');
}
async function AsyncReceipt(): Promise<never> {
  throw new Error('template unavailable');
}

// What `<Component />` is in a TSX handler (`JSX.Element`, an escaped string or a promise of one),
// built without the TSX compiler.
const element = (component: () => unknown) =>
  jsx(component, {}) as unknown as HtmlEscapedString | Promise<HtmlEscapedString>;

const answers: Array<[string, (c: Context) => Response | Promise<Response>]> = [
  ['c.text', (c) => c.text('charged', 201, receipt)],
  ['c.body', (c) => c.body('charged', 201, receipt)],
  ['c.newResponse', (c) => c.newResponse('charged', { status: 201, headers: receipt })],
  ['c.html given a string', (c) => c.html('<p>charged</p>', 201, receipt)],
  ['c.html given a promise', (c) => c.html(renderFails(), 201)],
  [
    'c.html given a promise, the status set by c.status',
    (c) => {
      c.status(201);
      return c.html(renderFails());
    },
  ],
  ['c.html given JSX', (c) => c.html(element(Receipt), 201)],
  ['c.html given async JSX', (c) => c.html(element(AsyncReceipt), 201)],
];

it.each(answers)('keeps the marker when %s fails on the handler answer', async (_, answer) => {
  let runs = 0;
  const app = quietHono();
  app.post('/charges', idempotency({ store: memoryStore() }), (c) => {
    runs++; // the charge
    return answer(c);
  });
  const [first, retry] = await sameKeyTwice(app);
  expect(first).toEqual({ status: 500, code: undefined });
  expect(retry).toEqual({ status: 409, code: 'response_not_captured' });
  expect(runs).toBe(1);
});

it('keeps the marker when the async render of c.html rejects with a value that is not an Error', async () => {
  let runs = 0;
  const app = quietHono();
  app.post('/charges', idempotency({ store: memoryStore() }), (c) => {
    runs++;
    return c.html(Promise.reject('template unavailable'), 201);
  });
  const [first, retry] = await sameKeyTwice(app);
  expect(first).toEqual({ thrown: 'template unavailable' });
  expect(retry).toEqual({ status: 409, code: 'response_not_captured' });
  expect(runs).toBe(1);
});

it('releases the key when the async render of a 5xx answer rejects', async () => {
  let runs = 0;
  const app = quietHono();
  app.post('/charges', idempotency({ store: memoryStore() }), (c) => {
    runs++;
    return c.html(renderFails(), 503);
  });
  const [, retry] = await sameKeyTwice(app);
  expect(retry).toEqual({ status: 500, code: undefined });
  expect(runs).toBe(2);
});

it('answers as before when the async render of c.html succeeds', async () => {
  let runs = 0;
  const app = quietHono();
  app.post('/charges', idempotency({ store: memoryStore() }), (c) => {
    runs++;
    return c.html(Promise.resolve('<p>charged</p>'), 201);
  });
  const [first, retry] = await sameKeyTwice(app);
  expect(first).toEqual({ status: 201, code: undefined });
  expect(retry).toEqual({ status: 201, code: undefined });
  expect(runs).toBe(1);
});
