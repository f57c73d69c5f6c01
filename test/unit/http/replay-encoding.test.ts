/**
 * `acceptsCoding` (RFC 9110 §12.5.3) and `replayForClient`: a replay stored with a Content-Encoding the
 * retry does not accept is decoded for it, when it accepts `identity`; anything else is replayed as
 * stored.
 */
import { brotliCompressSync, deflateRawSync, deflateSync, gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import type { HttpResponseData } from '../../../src/http/problem.js';
import {
  acceptsCoding,
  MAX_DECODED_REPLAY_BYTES,
  replayForClient,
} from '../../../src/http/replay-encoding.js';

describe('acceptsCoding', () => {
  it.each([
    [undefined, 'gzip', true],
    ['', 'gzip', false],
    ['', 'identity', true],
    ['gzip, deflate, br', 'gzip', true],
    ['GZIP;Q=0.5', 'gzip', true],
    ['x-gzip', 'gzip', true],
    ['gzip;q=0', 'gzip', false],
    ['identity', 'gzip', false],
    ['*', 'br', true],
    ['*;q=0, gzip', 'br', false],
    ['*;q=0', 'identity', false],
    ['*;q=0, identity', 'identity', true],
    ['identity;q=0', 'identity', false],
    ['gzip;q=oops', 'gzip', false],
  ])('%j accepts %s: %s', (header, coding, accepted) => {
    expect(acceptsCoding(header, coding)).toBe(accepted);
  });
});

describe('replayForClient', () => {
  const text = JSON.stringify({ id: 'ch_1', note: 'x'.repeat(100) });
  const replay = (coding: string, body: Uint8Array): HttpResponseData => ({
    status: 201,
    headers: [
      ['content-type', 'application/json'],
      ['content-encoding', coding],
      ['idempotent-replayed', 'true'],
    ],
    body,
  });

  it.each([
    ['gzip', gzipSync(text)],
    ['x-gzip', gzipSync(text)],
    ['br', brotliCompressSync(text)],
    ['deflate', deflateSync(text)],
    ['deflate', deflateRawSync(text)],
  ])('decodes %s for a client that accepts only identity', async (coding, body) => {
    const decoded = await replayForClient(replay(coding, body), 'identity');
    expect(Buffer.from(decoded.body).toString()).toBe(text);
    expect(decoded.headers).toEqual([
      ['content-type', 'application/json'],
      ['idempotent-replayed', 'true'],
    ]);
  });

  it('replays as stored when the client accepts the coding, refuses identity, or it does not decode', async () => {
    const stored = replay('gzip', gzipSync(text));
    expect(replayForClient(stored, 'gzip')).toBe(stored);
    expect(replayForClient(stored, 'br, identity;q=0')).toBe(stored);
    const broken = replay('gzip', Buffer.from('not gzip'));
    expect(await replayForClient(broken, 'identity')).toBe(broken);
    const unknown = replay('zstd', Buffer.from('bytes'));
    expect(replayForClient(unknown, 'identity')).toBe(unknown);
    const layered = replay('gzip', gzipSync(gzipSync(text)));
    layered.headers.push(['content-encoding', 'gzip']);
    expect(replayForClient(layered, 'identity')).toBe(layered);
    const plain: HttpResponseData = { status: 201, headers: [], body: Buffer.from(text) };
    expect(replayForClient(plain, 'identity')).toBe(plain);
  });

  it('decodes for a retry without Accept-Encoding (curl without --compressed, http.get): identity only, as the compression middlewares read it', async () => {
    const decoded = await replayForClient(replay('gzip', gzipSync(text)), undefined);
    expect(Buffer.from(decoded.body).toString()).toBe(text);
    expect(decoded.headers.map(([name]) => name)).not.toContain('content-encoding');
  });

  it('replays as stored a body that decodes past MAX_DECODED_REPLAY_BYTES', async () => {
    // 405 bytes of brotli for 256 MiB of zeros, as a handler passing on an upstream's answer may store.
    const bomb = replay('br', brotliCompressSync(Buffer.alloc(MAX_DECODED_REPLAY_BYTES + 1)));
    expect(await replayForClient(bomb, 'identity')).toBe(bomb);
  });
});
