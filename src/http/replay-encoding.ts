/**
 * A replay's Content-Encoding against the retry's `Accept-Encoding`. A body stored encoded (a compression
 * middleware inside the layer: Express's `compression` mounted after it, `hono/compress` after it, a
 * Fastify `onSend` hook before the plugin's) was replayed as stored to every retry, so a client that
 * accepts only `identity` (curl without `--compressed`, a proxy that asked for none) got gzip bytes it
 * cannot read. Such a replay is now decoded for that client: the same content, without the encoding.
 * @module
 */
import { brotliDecompressSync, gunzipSync, inflateRawSync, inflateSync } from 'node:zlib';
import type { HttpResponseData } from './problem.js';

// The codings the layer can undo, by the name a stored Content-Encoding gives (RFC 9110 §8.4.1).
const DECODERS: Readonly<Record<string, (bytes: Uint8Array) => Uint8Array>> = {
  gzip: gunzipSync,
  'x-gzip': gunzipSync,
  br: brotliDecompressSync,
  // `deflate` is the zlib format; some servers send raw deflate under that name.
  deflate: (bytes) => {
    try {
      return inflateSync(bytes);
    } catch {
      return inflateRawSync(bytes);
    }
  },
};

/** The q-value of each coding an `Accept-Encoding` value lists (lower-case; `x-gzip` as `gzip`). */
function qualities(acceptEncoding: string): Map<string, number> {
  const listed = new Map<string, number>();
  for (const item of acceptEncoding.split(',')) {
    const [name = '', ...params] = item.split(';');
    const coding = name.trim().toLowerCase();
    if (coding === '') continue;
    let q = 1;
    for (const param of params) {
      const [key = '', value = ''] = param.split('=');
      // A q that does not parse counts as 0: the layer then decodes, which every client can read.
      if (key.trim().toLowerCase() === 'q') q = Number.parseFloat(value.trim()) || 0;
    }
    listed.set(coding === 'x-gzip' ? 'gzip' : coding, q);
  }
  return listed;
}

/**
 * Whether a client whose `Accept-Encoding` is `acceptEncoding` reads `coding` (RFC 9110 §12.5.3): any
 * coding without the header; else one listed with a q above 0, or covered by `*`. `identity` is
 * acceptable unless refused (`identity;q=0`, or `*;q=0` without an `identity` entry).
 * @example
 * acceptsCoding('gzip, deflate', 'gzip'); // true
 * acceptsCoding('identity', 'gzip'); // false
 */
export function acceptsCoding(acceptEncoding: string | undefined, coding: string): boolean {
  if (acceptEncoding === undefined) return true;
  const listed = qualities(acceptEncoding);
  const name = coding === 'x-gzip' ? 'gzip' : coding;
  const q = listed.get(name) ?? listed.get('*');
  if (q !== undefined) return q > 0;
  return name === 'identity';
}

/**
 * `replay` as the retry can read it: unchanged unless its body is stored with a Content-Encoding (one
 * coding of {@link DECODERS}) that `acceptEncoding` does not accept while it accepts `identity`; then
 * its body decoded and the Content-Encoding left out. Bytes that do not decode are replayed as stored.
 */
export function replayForClient(
  replay: HttpResponseData,
  acceptEncoding: string | undefined,
): HttpResponseData {
  const index = replay.headers.findIndex(([name]) => name === 'content-encoding');
  // None, or several codings in a row (header lines of their own): replayed as stored.
  if (
    index === -1 ||
    replay.headers.findLastIndex(([name]) => name === 'content-encoding') !== index
  ) {
    return replay;
  }
  const coding = (replay.headers[index] as [string, string])[1].trim().toLowerCase();
  const decode = DECODERS[coding];
  if (decode === undefined || acceptsCoding(acceptEncoding, coding)) return replay;
  if (!acceptsCoding(acceptEncoding, 'identity')) return replay;
  let body: Uint8Array;
  try {
    body = decode(replay.body);
  } catch {
    return replay;
  }
  return {
    status: replay.status,
    headers: replay.headers.filter((_, i) => i !== index),
    body,
  };
}
