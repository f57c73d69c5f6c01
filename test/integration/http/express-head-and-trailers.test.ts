/**
 * The head the Express middleware lets out is the head Node would have sent without it: headers handed to
 * `res.writeHead` replace the ones set earlier under their names (not sent beside them), and a response
 * that announces trailers (`Trailer` + `res.addTrailers`) stays chunked and carries them.
 */
import { randomUUID } from 'node:crypto';
import { request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import express4 from 'express4';
import { afterEach, describe, expect, it } from 'vitest';
import { idempotency } from '../../../src/express/index.js';
import { memoryStore } from '../../../src/index.js';

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

const named = (raw: Raw, name: string) => raw.lines.filter(([n]) => n === name).map(([, v]) => v);

let server: Server | undefined;
afterEach(async () => {
  server?.closeAllConnections();
  await new Promise((done) => server?.close(done));
  server = undefined;
});

async function listen(app: express.Express): Promise<string> {
  const listening = app.listen(0, '127.0.0.1');
  server = listening;
  await new Promise((done) => listening.once('listening', done));
  return `http://127.0.0.1:${(listening.address() as AddressInfo).port}`;
}

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
    const base = await listen(app);
    const plain = await post(base, '/charges', {});
    const key = randomUUID();
    const first = await post(base, '/charges', { 'idempotency-key': key });
    const replay = await post(base, '/charges', { 'idempotency-key': key });
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
    const base = await listen(app);
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
});
