/**
 * Query parameters whose names share a base before a bracket (`a` and `a[]`, `a[0]`, `a[b]`) are one value
 * to a `qs`-style parser (Express 4's default query parser, Express 5's `'extended'` one), which builds it
 * in the order the parameters came: `?a=1&a[]=2` is `['1', '2']` and `?a[]=2&a=1` is `['2', '1']`. The
 * canonical query sorted the parameters by their whole name, which made the two one request: a key
 * reused for the other order was replayed the first one's answer instead of refused with 422.
 */
import express from 'express';
import express4 from 'express4';
import { describe, expect, it } from 'vitest';
import { idempotency } from '../../../src/express/index.js';
import { memoryStore } from '../../../src/index.js';
import { listenExpress } from '../../helpers/listen-express.js';
import { postWithKey } from '../../helpers/post-with-key.js';

/**
 * Serve `POST /batches` answering 201 with what the handler makes of the query, on Express 4 (qs by
 * default) or Express 5 set to qs (`'extended'`), behind the middleware; the URL and the run count.
 */
async function serve(version: 4 | 5, answer: (query: unknown) => unknown) {
  const app = version === 4 ? (express4 as unknown as typeof express)() : express();
  if (version === 5) app.set('query parser', 'extended');
  const served = { url: '', runs: 0 };
  app.use(idempotency({ store: memoryStore(), key: 'required' }));
  app.post('/batches', (req, res) => {
    served.runs++;
    res.status(201).json(answer(req.query));
  });
  served.url = `${await listenExpress(app)}/batches`;
  return served;
}

describe.each([4, 5] as const)('Express %i with a qs query parser', (version) => {
  it('a key reused for the same parameters in another order within one name is 422, not a replay', async () => {
    // Arrange
    const served = await serve(version, (query) => ({ ids: (query as { ids: unknown }).ids }));
    const url = served.url;
    // Act
    const first = await postWithKey(`${url}?ids=1&ids[]=2`, 'k', undefined);
    const again = await postWithKey(`${url}?ids=1&ids[]=2`, 'k', undefined);
    const reordered = await postWithKey(`${url}?ids[]=2&ids=1`, 'k', undefined);
    const other = await postWithKey(`${url}?ids[]=2&ids=1`, 'k2', undefined);
    // Assert
    expect(first).toEqual({ status: 201, replayed: null, body: { ids: ['1', '2'] } });
    expect(again).toEqual({ status: 201, replayed: 'true', body: { ids: ['1', '2'] } });
    expect(reordered).toMatchObject({ status: 422, body: { code: 'key_mismatch' } });
    expect(other).toEqual({ status: 201, replayed: null, body: { ids: ['2', '1'] } });
    expect(served.runs).toBe(2);
  });

  it('parameters of different names in another order are still one request', async () => {
    // Arrange
    const served = await serve(version, (query) => query);
    const url = served.url;
    // Act
    const first = await postWithKey(`${url}?b[]=1&a=2&b[]=3&c[x]=4`, 'k', undefined);
    const reordered = await postWithKey(`${url}?c[x]=4&a=2&b[]=1&b[]=3`, 'k', undefined);
    // Assert
    expect(first).toMatchObject({ status: 201, replayed: null });
    expect(reordered).toMatchObject({ status: 201, replayed: 'true' });
    expect(served.runs).toBe(1);
  });
});
