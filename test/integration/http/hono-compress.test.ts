/**
 * Hono with `hono/compress`, as `docs/http.md` › Replayed headers describes it. Mounted after the layer,
 * the gzip bytes are stored with their Content-Encoding and replayed as they are to a retry that accepts
 * gzip, decoded for one that accepts only `identity` (earlier versions sent it the gzip bytes too), and
 * without the first response's `Vary: Accept-Encoding` unless `replayHeaders` names `vary`. Mounted before the layer, the plain body is stored and each replay is encoded (or not) for
 * the client asking, with its Vary.
 */
import { request } from 'node:http';
import { Hono, type MiddlewareHandler } from 'hono';
import { compress } from 'hono/compress';
import { describe, expect, it } from 'vitest';
import { idempotency } from '../../../src/hono/index.js';
import { memoryStore } from '../../../src/index.js';
import { listenFetchForTest } from '../../helpers/listen-fetch.js';

interface RawAnswer {
  status: number;
  encoding: string | undefined;
  vary: string | undefined;
  bytes: Buffer;
}

// Through node:http, which neither adds an Accept-Encoding of its own nor decodes the answer (fetch does).
function post(url: string, key: string, acceptEncoding: string): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const sent = request(
      url,
      {
        method: 'POST',
        headers: {
          'idempotency-key': key,
          'accept-encoding': acceptEncoding,
          'content-type': 'application/json',
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('error', reject);
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            encoding: res.headers['content-encoding'],
            vary: res.headers.vary,
            bytes: Buffer.concat(chunks),
          }),
        );
      },
    );
    sent.on('error', reject);
    sent.end('{"amount":4200}');
  });
}

const answer = { order: 'x'.repeat(2000) };
const GZIP_MAGIC = '1f8b';

async function start(order: 'compress first' | 'layer first', replayHeaders?: string[]) {
  const app = new Hono();
  const layer = idempotency({
    store: memoryStore(),
    key: 'required',
    ...(replayHeaders === undefined ? {} : { replayHeaders }),
  });
  const gzip: MiddlewareHandler = compress({ threshold: 0 });
  const [outer, inner] = order === 'compress first' ? [gzip, layer] : [layer, gzip];
  app.post('/orders', outer, inner, (c) => c.json(answer, 201));
  return `${await listenFetchForTest(app.fetch)}/orders`;
}

describe('Hono with hono/compress', () => {
  it('mounted before the layer: each replay is encoded for the client asking, with Vary', async () => {
    const url = await start('compress first');
    const first = await post(url, 'k-compress-1', 'gzip');
    const retry = await post(url, 'k-compress-1', 'identity');
    expect(first.encoding).toBe('gzip');
    expect(retry.status).toBe(201);
    expect(retry.encoding).toBeUndefined();
    expect(JSON.parse(retry.bytes.toString())).toEqual(answer);
    expect(retry.vary).toBe('Accept-Encoding');
  });

  it('mounted after the layer: the gzip bytes are replayed as stored to a client that accepts gzip, decoded for one that does not, Vary only when replayHeaders names it', async () => {
    const url = await start('layer first');
    const first = await post(url, 'k-compress-2', 'gzip');
    const gzipped = await post(url, 'k-compress-2', 'gzip, deflate');
    const identity = await post(url, 'k-compress-2', 'identity');
    expect(first.encoding).toBe('gzip');
    expect(first.vary).toBe('Accept-Encoding');
    expect(gzipped.encoding).toBe('gzip');
    expect(gzipped.bytes.subarray(0, 2).toString('hex')).toBe(GZIP_MAGIC);
    expect(gzipped.bytes.equals(first.bytes)).toBe(true);
    expect(gzipped.vary).toBeUndefined();
    // Earlier versions sent this client the gzip bytes too, which it cannot read.
    expect(identity.status).toBe(201);
    expect(identity.encoding).toBeUndefined();
    expect(JSON.parse(identity.bytes.toString())).toEqual(answer);

    const withVary = await start('layer first', ['vary']);
    await post(withVary, 'k-compress-3', 'gzip');
    const replayed = await post(withVary, 'k-compress-3', 'gzip');
    expect(replayed.encoding).toBe('gzip');
    expect(replayed.vary).toBe('Accept-Encoding');
  });
});
