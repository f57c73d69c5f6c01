/**
 * The head the Express middleware lets out is the head Node would have sent without it: headers handed to
 * `res.writeHead` replace the ones set earlier under their names (not sent beside them), and a response
 * that announces trailers (`Trailer` + `res.addTrailers`) stays chunked and carries them.
 */
import { randomUUID } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import express from 'express';
import express4 from 'express4';
import { describe, expect, it } from 'vitest';
import { idempotency } from '../../../src/express/index.js';
import { memoryStore } from '../../../src/index.js';
import { listenExpress } from '../../helpers/listen-express.js';

interface Raw {
  status: number;
  /** Header lines as sent, names lower-cased: repeated names stay repeated. */
  lines: Array<[string, string]>;
  trailers: Array<[string, string]>;
  body: string;
}

const pairs = (flat: string[]): Array<[string, string]> => {
  const out: Array<[string, string]> = [];
  for (let i = 0; i + 1 < flat.length; i += 2) out.push([flat[i]!.toLowerCase(), flat[i + 1]!]);
  return out;
};

function post(base: string, path: string, headers: Record<string, string>): Promise<Raw> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${base}${path}`, { method: 'POST', headers, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        body += chunk;
      });
      res.on('end', () =>
        resolve({
          status: res.statusCode ?? 0,
          lines: pairs(res.rawHeaders),
          trailers: pairs(res.rawTrailers),
          body,
        }),
      );
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

/**
 * A middleware that wraps `res.end` on the response, as compression does: the middleware after it then
 * patches that response directly instead of capturing it through the prototype's hooks.
 */
function wrapEnd(_req: express.Request, res: express.Response, next: express.NextFunction): void {
  const end = res.end;
  res.end = function (this: express.Response, ...args: unknown[]) {
    return (end as (...a: unknown[]) => express.Response).apply(this, args);
  } as express.Response['end'];
  next();
}

/** The same POST without a key, then twice under one new key: Node's own answer, the first, the replay. */
async function plainFirstReplay(base: string, path: string): Promise<[Raw, Raw, Raw]> {
  const plain = await post(base, path, {});
  const key = randomUUID();
  const first = await post(base, path, { 'idempotency-key': key });
  const replay = await post(base, path, { 'idempotency-key': key });
  return [plain, first, replay];
}

const named = (raw: Raw, name: string) => raw.lines.filter(([n]) => n === name).map(([, v]) => v);

describe.each([
  ['Express 5', express],
  ['Express 4', express4 as unknown as typeof express],
])('%s: the head under the middleware', (_name, framework) => {
  it('sends headers handed to writeHead in place of the ones set before, once each, as Node does', async () => {
    const app = framework();
    app.use(idempotency({ store: memoryStore(), replayHeaders: ['x-request-kind'] }));
    app.post('/charges', (_req, res) => {
      res.setHeader('Content-Type', 'text/plain');
      res.setHeader('X-Request-Kind', 'draft');
      res.writeHead(201, ['Content-Type', 'application/json', 'X-Request-Kind', 'charge']);
      res.end('{"id":"ch_1"}');
    });
    const base = await listenExpress(app);
    const [plain, first, replay] = await plainFirstReplay(base, '/charges');
    // Before, the array was appended: two Content-Type lines (text/plain and application/json).
    for (const response of [plain, first, replay]) {
      expect(response.status).toBe(201);
      expect(named(response, 'content-type')).toEqual(['application/json']);
      expect(named(response, 'x-request-kind')).toEqual(['charge']);
      expect(response.body).toBe('{"id":"ch_1"}');
    }
    expect(named(replay, 'idempotent-replayed')).toEqual(['true']);
  });

  it('keeps a response with trailers chunked, with its trailers, and stores its body', async () => {
    let runs = 0;
    const app = framework();
    app.use(idempotency({ store: memoryStore() }));
    app.post('/export', (_req, res) => {
      runs++;
      res.setHeader('Content-Type', 'text/csv');
      res.setHeader('Trailer', 'X-Checksum');
      res.addTrailers({ 'X-Checksum': 'sha256=abc' });
      res.end('id,amount\n1,4200\n');
    });
    const base = await listenExpress(app);
    const key = randomUUID();
    // Before, the held end gave the head a Content-Length, and Node threw ERR_HTTP_TRAILER_INVALID.
    const first = await post(base, '/export', { 'idempotency-key': key });
    expect(first.status).toBe(200);
    expect(named(first, 'transfer-encoding')).toEqual(['chunked']);
    expect(first.trailers).toEqual([['x-checksum', 'sha256=abc']]);
    expect(first.body).toBe('id,amount\n1,4200\n');
    const replay = await post(base, '/export', { 'idempotency-key': key });
    expect(replay.status).toBe(200);
    expect(replay.body).toBe('id,amount\n1,4200\n');
    expect(named(replay, 'idempotent-replayed')).toEqual(['true']);
    expect(runs).toBe(1);
  });

  it('sends a response whose Content-Length the handler removed without one, as Node does', async () => {
    const app = framework();
    app.use('/wrapped', wrapEnd);
    app.use(idempotency({ store: memoryStore() }));
    app.post(['/receipts', '/wrapped/receipts'], (_req, res) => {
      res.status(201).setHeader('Content-Type', 'text/plain');
      res.setHeader('Content-Length', '7');
      res.removeHeader('Content-Length');
      res.end('receipt');
    });
    const base = await listenExpress(app);
    for (const path of ['/receipts', '/wrapped/receipts']) {
      // Before, the held end gave the head a Content-Length of its own: a head Node would not have sent.
      const [plain, first, replay] = await plainFirstReplay(base, path);
      for (const response of [plain, first]) {
        expect(response.status).toBe(201);
        expect(named(response, 'content-length')).toEqual([]);
        expect(named(response, 'transfer-encoding')).toEqual(['chunked']);
        expect(response.body).toBe('receipt');
      }
      expect(replay.status).toBe(201);
      expect(replay.body).toBe('receipt');
      expect(named(replay, 'idempotent-replayed')).toEqual(['true']);
    }
  });

  it('stores the status the head went out with, not one assigned after writeHead, and runs once', async () => {
    let runs = 0;
    const app = framework();
    app.use('/wrapped', wrapEnd);
    app.use(idempotency({ store: memoryStore() }));
    app.post(['/charges', '/wrapped/charges'], (_req, res) => {
      runs++;
      res.writeHead(201, { 'Content-Type': 'application/json' });
      // Changes nothing on the wire: the client gets the 201.
      res.statusCode = 500;
      res.end('{"id":"ch_3"}');
    });
    const base = await listenExpress(app);
    for (const path of ['/charges', '/wrapped/charges']) {
      const key = randomUUID();
      // Before, the 500 was stored: the key was released and the retry charged again.
      const first = await post(base, path, { 'idempotency-key': key });
      const retry = await post(base, path, { 'idempotency-key': key });
      expect(first.status).toBe(201);
      expect(retry.status).toBe(201);
      expect(retry.body).toBe('{"id":"ch_3"}');
      expect(named(retry, 'idempotent-replayed')).toEqual(['true']);
    }
    expect(runs).toBe(2);
  });

  it('lets a head flushed before the body (res.flushHeaders) out as sent, and stores the body', async () => {
    let runs = 0;
    const app = framework();
    app.use(idempotency({ store: memoryStore() }));
    app.post('/reports', (_req, res) => {
      runs++;
      res.status(202).setHeader('Content-Type', 'text/plain');
      res.flushHeaders();
      setTimeout(() => res.end('queued'), 10);
    });
    const base = await listenExpress(app);
    const [plain, first, replay] = await plainFirstReplay(base, '/reports');
    for (const response of [plain, first, replay]) {
      expect(response.status).toBe(202);
      expect(named(response, 'content-type')).toEqual(['text/plain']);
      expect(response.body).toBe('queued');
    }
    expect(named(first, 'transfer-encoding')).toEqual(['chunked']);
    expect(named(replay, 'idempotent-replayed')).toEqual(['true']);
    expect(runs).toBe(2);
  });

  it('refuses a header set after writeHead as Node does, and stores the head that was sent', async () => {
    const refused: unknown[] = [];
    const app = framework();
    app.use(idempotency({ store: memoryStore(), replayHeaders: ['x-late'] }));
    app.post('/charges', (_req, res) => {
      res.writeHead(201, { 'Content-Type': 'application/json' });
      try {
        res.setHeader('X-Late', 'yes');
      } catch (error) {
        refused.push((error as { code?: unknown }).code);
      }
      res.end('{"id":"ch_2"}');
    });
    const base = await listenExpress(app);
    const [plain, first, replay] = await plainFirstReplay(base, '/charges');
    expect(refused).toEqual(['ERR_HTTP_HEADERS_SENT', 'ERR_HTTP_HEADERS_SENT']);
    for (const response of [plain, first, replay]) {
      expect(response.status).toBe(201);
      expect(named(response, 'content-type')).toEqual(['application/json']);
      expect(named(response, 'x-late')).toEqual([]);
      expect(response.body).toBe('{"id":"ch_2"}');
    }
    expect(named(replay, 'idempotent-replayed')).toEqual(['true']);
  });
});
