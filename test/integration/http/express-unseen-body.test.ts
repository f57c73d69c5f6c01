/**
 * Express: a body a middleware before the layer read and kept on another property than `req.body`
 * (`req.xml`). The stream was read, `req.body` was empty, and the fingerprint covered no body: another
 * body under the same key was replayed the first one's answer. Such a request is now refused (the
 * error goes to the app's error handler: a 500, nothing run or claimed), unless the route sets
 * `requestBodyLimit: false` (a digest header in `fingerprintHeaders` then covers the body).
 */
import express from 'express';
import express4 from 'express4';
import { describe, expect, it } from 'vitest';
import { idempotency } from '../../../src/express/index.js';
import { memoryStore, type Store } from '../../../src/index.js';
import { listenExpress } from '../../helpers/listen-express.js';

/** A memory store that keeps the fingerprint of each claim. */
function fingerprinting(): { store: Store; seen: string[] } {
  const inner = memoryStore();
  const seen: string[] = [];
  const store = Object.create(inner) as Store;
  store.claim = (key, claim) => {
    seen.push(claim.fingerprint);
    return inner.claim(key, claim);
  };
  return { store, seen };
}

let runs = 0;

async function start(
  framework: typeof express | typeof express4,
  store: Store,
  requestBodyLimit?: false,
): Promise<string> {
  const app = framework();
  // Reads the XML body and keeps it as req.xml, leaving req.body alone.
  app.use((req, _res, next) => {
    let text = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => {
      text += chunk;
    });
    req.on('end', () => {
      (req as { xml?: string }).xml = text;
      next();
    });
  });
  app.use(
    idempotency({
      store,
      key: 'required',
      ...(requestBodyLimit === false
        ? { requestBodyLimit, fingerprintHeaders: ['content-digest'] }
        : {}),
    }),
  );
  app.post('/orders', (req, res) => {
    runs++;
    res.status(201).json({ xml: (req as { xml?: string }).xml });
  });
  return listenExpress(app);
}

async function post(url: string, key: string, xml: string) {
  const response = await fetch(`${url}/orders`, {
    method: 'POST',
    headers: { 'idempotency-key': key, 'content-type': 'application/xml' },
    body: xml,
  });
  return { status: response.status, text: await response.text() };
}

describe.each([
  ['express 5', express],
  ['express 4', express4],
] as Array<[string, typeof express]>)(
  'a body read before the middleware and left nowhere (%s)',
  (_name, framework) => {
    it('is refused (500 through the error handler), runs and claims nothing', async () => {
      // Arrange
      runs = 0;
      const { store, seen } = fingerprinting();
      const url = await start(framework, store);
      // Act
      const answer = await post(url, 'k-xml', '<order id="1"/>');
      // Assert
      expect(answer.status).toBe(500);
      expect(answer.text).toContain('req.body is undefined');
      expect(runs).toBe(0);
      expect(seen).toEqual([]);
    });

    it('runs with requestBodyLimit: false (the body left out, a digest header fingerprinted)', async () => {
      runs = 0;
      const url = await start(framework, memoryStore(), false);
      const answer = await post(url, 'k-xml', '<order id="1"/>');
      expect(answer.status).toBe(201);
      expect(runs).toBe(1);
    });
  },
);
