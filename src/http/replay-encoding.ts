/**
 * A replay's Content-Encoding against the retry's `Accept-Encoding`. A body stored encoded (a compression
 * middleware inside the layer: Express's `compression` mounted after it, `hono/compress` after it, a
 * Fastify `onSend` hook before the plugin's) was replayed as stored to every retry, so a client that
 * accepts only `identity` (curl without `--compressed`, a proxy that asked for none) got gzip bytes it
 * cannot read. Such a replay is now decoded for that client: the same content, without the encoding.
 * @module
 */
import { promisify } from 'node:util';
import { brotliDecompress, gunzip, inflate, inflateRaw, type ZlibOptions } from 'node:zlib';
import type { HttpResponseData } from './problem.js';

/**
 * The most a replay is decoded to: a stored body is at most `maxBodyBytes` encoded, but gzip or brotli
 * of a repetitive body (a handler passing on an upstream's encoded answer, 256 MiB of zeros in 405 bytes)
 * decodes to any size. Past this the replay goes as stored.
 */
export const MAX_DECODED_REPLAY_BYTES = 64 * 1024 * 1024;

const OUTPUT_LIMIT: ZlibOptions = { maxOutputLength: MAX_DECODED_REPLAY_BYTES };
const gunzipAsync = promisify(gunzip);
const brotliAsync = promisify(brotliDecompress);
const inflateAsync = promisify(inflate);
const inflateRawAsync = promisify(inflateRaw);

// The codings the layer can undo, by the name a stored Content-Encoding gives (RFC 9110 §8.4.1). Off the
// event loop (zlib's thread pool): a large body decoded in place held every other request up (1.3 s for
// 256 MiB).
const DECODERS: Readonly<Record<string, (bytes: Uint8Array) => Promise<Uint8Array>>> = {
  gzip: (bytes) => gunzipAsync(bytes, OUTPUT_LIMIT),
  'x-gzip': (bytes) => gunzipAsync(bytes, OUTPUT_LIMIT),
  br: (bytes) => brotliAsync(bytes, OUTPUT_LIMIT),
  // `deflate` is the zlib format; some servers send raw deflate under that name.
  deflate: (bytes) =>
    inflateAsync(bytes, OUTPUT_LIMIT).catch((error: unknown) =>
      isTooLarge(error) ? Promise.reject(error) : inflateRawAsync(bytes, OUTPUT_LIMIT),
    ),
};

// zlib's refusal of an output past `maxOutputLength`.
function isTooLarge(error: unknown): boolean {
  return (error as { code?: unknown } | null)?.code === 'ERR_BUFFER_TOO_LARGE';
}

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
 * its body decoded and the Content-Encoding left out. A retry without `Accept-Encoding` counts as one that
 * accepts `identity` only: RFC 9110 lets a server send it any coding, but the compression middlewares
 * never do (negotiator reads a missing header as `identity`), and the clients that send none (curl
 * without `--compressed`, `http.get`) cannot read one. Bytes that do not decode, or decode past
 * {@link MAX_DECODED_REPLAY_BYTES}, are replayed as stored. The replay itself (no promise) when nothing is
 * to be decoded, as for almost every replay.
 */
export function replayForClient(
  replay: HttpResponseData,
  acceptEncoding: string | undefined,
): HttpResponseData | Promise<HttpResponseData> {
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
  const accepted = acceptEncoding ?? 'identity';
  if (decode === undefined || acceptsCoding(accepted, coding)) return replay;
  if (!acceptsCoding(accepted, 'identity')) return replay;
  return decode(replay.body).then(
    (body) => ({
      status: replay.status,
      headers: replay.headers.filter((_, i) => i !== index),
      body,
    }),
    () => replay,
  );
}
