/**
 * What happens around the Express middleware's held `end`: the head counts as sent from the handler's
 * `end` on (an error handler or Express's 404 handler after it cannot replace the stored response), the
 * head keeps the Content-Length Node would have given it, a response destroyed by a failed stream keeps a
 * `response_not_captured` marker (the handler answered: never run again), and a body encoded by the handler or by `compression` mounted after the middleware is replayed
 * with its Content-Encoding while `compression` mounted before it encodes each replay again.
 */
import { randomUUID } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { gunzipSync } from 'node:zlib';
import compression from 'compression';
import express from 'express';
import express4 from 'express4';
import { describe, expect, it } from 'vitest';
import { idempotency } from '../../../src/express/index.js';
import { memoryStore } from '../../../src/index.js';
import { listenExpress } from '../../helpers/listen-express.js';

interface Raw {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

// A raw client: fetch decodes gzip and chooses Accept-Encoding itself.
function post(base: string, path: string, headers: Record<string, string>): Promise<Raw> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${base}${path}`, { method: 'POST', headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }),
      );
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

describe.each([
  ['Express 5', express],
  ['Express 4', express4 as unknown as typeof express],
])('%s: the held end', (_name, framework) => {
  it('counts the head as sent from the handler’s end on: a later error or next() does not replace the response', async () => {
    const runs = new Map<string, number>();
    const app = framework();
    app.use(idempotency({ store: memoryStore() }));
    app.post('/charge', (req, res, next) => {
      runs.set(req.path, (runs.get(req.path) ?? 0) + 1);
      res.status(201).json({ charged: true });
      next(new Error('audit log failed'));
    });
    app.post('/next', (req, res, next) => {
      runs.set(req.path, (runs.get(req.path) ?? 0) + 1);
      res.status(201).json({ charged: true });
      next(); // reaches Express's 404 handler
    });
    // The usual guard: an error after the response went out is passed on, not answered.
    app.use(
      (error: Error, _req: express.Request, res: express.Response, next: express.NextFunction) => {
        if (res.headersSent) return next(error);
        res.status(500).json({ error: error.message });
      },
    );
    const base = await listenExpress(app);
    for (const path of ['/next', '/charge']) {
      const key = randomUUID();
      const first = await post(base, path, { 'idempotency-key': key });
      const retry = await post(base, path, { 'idempotency-key': key });
      // Express's final handler closes the connection after an error that follows a sent head: only once
      // the held bytes went out (./express-error-after-held-end.test.ts).
      expect(first.status).toBe(201);
      expect(JSON.parse(String(first.body))).toEqual({ charged: true });
      expect(retry.status).toBe(201);
      expect(retry.headers['idempotent-replayed']).toBe('true');
      expect(JSON.parse(retry.body.toString())).toEqual({ charged: true });
      expect(runs.get(path)).toBe(1);
    }
  });

  it('sends a body handed whole to res.end with its Content-Length, as Node would, not chunked', async () => {
    const app = framework();
    app.use(idempotency({ store: memoryStore() }));
    app.post('/plain', (_req, res) => {
      res.statusCode = 201;
      res.end('héllo');
    });
    app.post('/empty', (_req, res) => {
      res.end();
    });
    app.post('/no-content', (_req, res) => {
      res.statusCode = 204;
      res.end();
    });
    const base = await listenExpress(app);
    const plain = await post(base, '/plain', { 'idempotency-key': randomUUID() });
    expect(plain.headers['content-length']).toBe(String(Buffer.byteLength('héllo')));
    expect(plain.headers['transfer-encoding']).toBeUndefined();
    expect(plain.body.toString()).toBe('héllo');
    const empty = await post(base, '/empty', { 'idempotency-key': randomUUID() });
    expect(empty.headers['content-length']).toBe('0');
    const noContent = await post(base, '/no-content', { 'idempotency-key': randomUUID() });
    expect(noContent.status).toBe(204);
    expect(noContent.headers['content-length']).toBeUndefined();
    expect(noContent.headers['transfer-encoding']).toBeUndefined();
  });

  it('keeps a response_not_captured marker for a response destroyed by a failed stream: settled, never run again', async () => {
    let runs = 0;
    const app = framework();
    app.use(idempotency({ store: memoryStore() }));
    app.post('/export', (_req, res) => {
      runs++;
      res.type('text/csv');
      const rows = Readable.from(
        (async function* () {
          yield 'id,amount\n';
          await new Promise((done) => setTimeout(done, 10));
          if (runs === 1) throw new Error('upstream broke');
          yield '1,4200\n';
        })(),
      );
      pipeline(rows, res).catch(() => {});
    });
    const base = await listenExpress(app);
    const key = randomUUID();
    await post(base, '/export', { 'idempotency-key': key }).catch(() => undefined);
    // Once, the key stayed in progress (its lease extended while the process lived): 409 in_progress
    // forever. Then it was released, and the retry charged a second time: the handler answered 200 with
    // its stream, so its work is done, and the key now keeps a marker.
    let code: string | undefined;
    for (let i = 0; i < 50 && code !== 'response_not_captured'; i++) {
      await new Promise((done) => setTimeout(done, 10));
      const retry = await post(base, '/export', { 'idempotency-key': key });
      expect(retry.status).toBe(409);
      code = (JSON.parse(retry.body.toString()) as { code: string }).code;
    }
    expect(code).toBe('response_not_captured');
    expect(runs).toBe(1);
  });

  it('releases the key of a response destroyed with an error before anything went out: nothing was answered', async () => {
    let runs = 0;
    const app = framework();
    app.use(idempotency({ store: memoryStore() }));
    app.post('/abandon', (_req, res) => {
      runs++;
      // In place of an answer: the first run gives up on the request; the retry answers.
      if (runs === 1) res.destroy(new Error('gave up before answering'));
      else res.status(201).json({ run: runs });
    });
    const base = await listenExpress(app);
    const key = randomUUID();
    await post(base, '/abandon', { 'idempotency-key': key }).catch(() => undefined);
    let retry: Raw | undefined;
    for (let i = 0; i < 50 && retry?.status !== 201; i++) {
      await new Promise((done) => setTimeout(done, 10));
      retry = await post(base, '/abandon', { 'idempotency-key': key });
    }
    expect(retry?.status).toBe(201);
    expect(runs).toBe(2);
  });
});

describe('Express: encoded bodies', () => {
  const json = JSON.stringify({ id: 'ch_1', amount: 4200, note: 'x'.repeat(200) });

  async function start(order: 'compression first' | 'compression after') {
    let runs = 0;
    const app = express();
    const idem = idempotency({ store: memoryStore() });
    const compress = compression({ threshold: 0 });
    if (order === 'compression first') app.use(compress, idem);
    else app.use(idem, compress);
    app.post('/charge', (_req, res) => {
      runs++;
      res.status(201).type('application/json').send(json);
    });
    return { base: await listenExpress(app), runs: () => runs };
  }

  it('compression mounted after the middleware: the gzip bytes are stored and replayed with their Content-Encoding', async () => {
    const { base, runs } = await start('compression after');
    const key = randomUUID();
    const first = await post(base, '/charge', {
      'idempotency-key': key,
      'accept-encoding': 'gzip',
    });
    const retry = await post(base, '/charge', {
      'idempotency-key': key,
      'accept-encoding': 'gzip',
    });
    expect(first.headers['content-encoding']).toBe('gzip');
    expect(retry.headers['content-encoding']).toBe('gzip');
    expect(retry.headers['idempotent-replayed']).toBe('true');
    expect(gunzipSync(retry.body).toString()).toBe(json);
    expect(runs()).toBe(1);
  });

  it('compression mounted before the middleware: the handler’s bytes are stored, and each replay is encoded for its client', async () => {
    const { base, runs } = await start('compression first');
    const key = randomUUID();
    const first = await post(base, '/charge', {
      'idempotency-key': key,
      'accept-encoding': 'gzip',
    });
    expect(first.headers['content-encoding']).toBe('gzip');
    expect(gunzipSync(first.body).toString()).toBe(json);
    const gzipped = await post(base, '/charge', {
      'idempotency-key': key,
      'accept-encoding': 'gzip',
    });
    expect(gzipped.headers['idempotent-replayed']).toBe('true');
    expect(gzipped.headers['content-encoding']).toBe('gzip');
    expect(gunzipSync(gzipped.body).toString()).toBe(json);
    const identity = await post(base, '/charge', {
      'idempotency-key': key,
      'accept-encoding': 'identity',
    });
    expect(identity.headers['idempotent-replayed']).toBe('true');
    expect(identity.headers['content-encoding']).toBeUndefined();
    expect(identity.body.toString()).toBe(json);
    expect(runs()).toBe(1);
  });
});
