/**
 * Requests that differ only in a lone surrogate, or in a query byte that is not UTF-8, must not share a
 * fingerprint. UTF-8 has no form for a lone surrogate and the fingerprint's hash wrote U+FFFD in its place,
 * so `{"memo":"\ud800"}`, `{"memo":"\udc00"}` and `{"memo":"\ufffd"}` fingerprinted alike, as did
 * `?m=%FF` and `?m=%FE` (decoded to U+FFFD): a key reused for the other request was replayed the first
 * one's answer, which Express 4's `qs` (`'%FF'` vs `'%FE'`) or the handler (the code unit) tells apart.
 * Now the second request is 422 `key_mismatch`, and the handler runs once.
 */
import express from 'express';
import express4 from 'express4';
import { describe, expect, it } from 'vitest';
import { idempotency as expressIdempotency } from '../../../src/express/index.js';
import { withIdempotency } from '../../../src/fetch/index.js';
import { memoryStore } from '../../../src/index.js';
import { listenExpress } from '../../helpers/listen-express.js';
import { postWithKey } from '../../helpers/post-with-key.js';

const codeUnits = (text: string) => [...text].map((c) => c.charCodeAt(0).toString(16));

describe('a key reused for a request that differs only in a lone surrogate', () => {
  it('fetch: JSON escapes \\ud800, \\udc00 and \\ufffd are three requests, not replays', async () => {
    // Arrange
    let runs = 0;
    const handler = withIdempotency(
      async (request: Request) => {
        runs++;
        const { memo } = (await request.json()) as { memo: string };
        return Response.json({ memo: codeUnits(memo) }, { status: 201 });
      },
      { store: memoryStore(), key: 'required' },
    );
    const send = async (body: string) => {
      const response = await handler(
        new Request('http://x/payments', {
          method: 'POST',
          headers: { 'idempotency-key': 'k', 'content-type': 'application/json' },
          body,
        }),
      );
      return { status: response.status, replayed: response.headers.get('idempotent-replayed') };
    };
    // Act
    const first = await send('{"memo":"\\ud800"}');
    const again = await send('{ "memo" : "\\uD800" }');
    const low = await send('{"memo":"\\udc00"}');
    const replacement = await send('{"memo":"\\ufffd"}');
    // Assert
    expect(first).toEqual({ status: 201, replayed: null });
    expect(again).toEqual({ status: 201, replayed: 'true' });
    expect(low.status).toBe(422);
    expect(replacement.status).toBe(422);
    expect(runs).toBe(1);
  });

  it.each([
    ['Express 5', express],
    ['Express 4', express4 as unknown as typeof express],
  ])(
    '%s: a text body decoded as UTF-16 holding \\ud800, then \\udc00',
    async (_name, framework) => {
      // Arrange: express.text() decodes `charset=utf-16le` bytes 00 D8 to a lone surrogate
      let runs = 0;
      const app = framework();
      app.use(framework.text({ type: 'text/plain' }));
      app.use(expressIdempotency({ store: memoryStore(), key: 'required' }));
      app.post('/notes', (req, res) => {
        runs++;
        res.status(201).json({ text: codeUnits(req.body as string) });
      });
      const url = `${await listenExpress(app)}/notes`;
      const utf16 = { 'content-type': 'text/plain; charset=utf-16le' };
      // Act
      const first = await postWithKey(url, 'k', Buffer.from([0x00, 0xd8]), utf16);
      const again = await postWithKey(url, 'k', Buffer.from([0x00, 0xd8]), utf16);
      const other = await postWithKey(url, 'k', Buffer.from([0x00, 0xdc]), utf16);
      // Assert
      expect(first).toMatchObject({ status: 201, body: { text: ['d800'] } });
      expect(again).toMatchObject({ status: 201, replayed: 'true' });
      expect(other).toMatchObject({ status: 422, body: { code: 'key_mismatch' } });
      expect(runs).toBe(1);
    },
  );

  it('Express 4: query bytes that are not UTF-8 (%FF, %FE) are two requests, as qs reads them', async () => {
    // Arrange
    let runs = 0;
    const app = express4();
    app.use(expressIdempotency({ store: memoryStore(), key: 'required' }));
    app.post('/search', (req, res) => {
      runs++;
      res.status(201).json({ query: req.query });
    });
    const url = `${await listenExpress(app)}/search`;
    // Act
    const first = await postWithKey(`${url}?m=%FF`, 'k', undefined);
    const again = await postWithKey(`${url}?m=%FF`, 'k', undefined);
    const other = await postWithKey(`${url}?m=%FE`, 'k', undefined);
    const replacement = await postWithKey(`${url}?m=%EF%BF%BD`, 'k', undefined);
    // Assert
    expect(first).toMatchObject({ status: 201, body: { query: { m: '%FF' } } });
    expect(again).toMatchObject({ status: 201, replayed: 'true' });
    expect(other).toMatchObject({ status: 422, body: { code: 'key_mismatch' } });
    expect(replacement).toMatchObject({ status: 422, body: { code: 'key_mismatch' } });
    expect(runs).toBe(1);
  });
});
