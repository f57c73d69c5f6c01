/**
 * The stored form of an HTTP response: its status, the allow-listed headers and the body bytes, or a
 * marker saying the response was too large to keep. Used as the engine's outcome codec.
 * @module
 */
import type { OutcomeCodec } from '../core/outcome.js';

/** A response kept for replay. */
export interface StoredResponse {
  kind: 'response';
  /** HTTP status. */
  status: number;
  /** Allow-listed headers, lower-case names, one pair per value. */
  headers: Array<[string, string]>;
  /** The body, byte for byte. */
  body: Uint8Array;
}

/** The handler's response exceeded `maxBodyBytes`: it was sent once and not kept. */
export interface TooLargeMarker {
  kind: 'too_large';
  /** Status of the response that was sent. */
  status: number;
  /** Bytes the body had reached when it crossed the limit. */
  bytes: number;
}

/** What an HTTP execution stores. */
export type HttpOutcome = StoredResponse | TooLargeMarker;

const VERSION = 0x68; // 'h'

interface Meta {
  k: 'r' | 't';
  s: number;
  h?: Array<[string, string]>;
  n?: number;
}

/**
 * Layout: one version byte, a 4-byte big-endian length, the JSON metadata, then the body bytes raw (no
 * base64: binary bodies round-trip byte-exact and cost their own size).
 */
export const httpResponseCodec: OutcomeCodec = {
  encode(value) {
    const outcome = value as HttpOutcome;
    const meta: Meta =
      outcome.kind === 'response'
        ? { k: 'r', s: outcome.status, h: outcome.headers }
        : { k: 't', s: outcome.status, n: outcome.bytes };
    const metaBytes = Buffer.from(JSON.stringify(meta), 'utf8');
    const body = outcome.kind === 'response' ? outcome.body : new Uint8Array(0);
    const out = Buffer.allocUnsafe(5 + metaBytes.byteLength + body.byteLength);
    out[0] = VERSION;
    out.writeUInt32BE(metaBytes.byteLength, 1);
    metaBytes.copy(out, 5);
    out.set(body, 5 + metaBytes.byteLength);
    return out;
  },
  decode(bytes) {
    const buffer = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    if (buffer[0] !== VERSION) throw new Error(`Unknown HTTP outcome version ${String(buffer[0])}`);
    const metaLength = buffer.readUInt32BE(1);
    const meta = JSON.parse(buffer.subarray(5, 5 + metaLength).toString('utf8')) as Meta;
    if (meta.k === 't') return { kind: 'too_large', status: meta.s, bytes: meta.n ?? 0 };
    const stored: StoredResponse = {
      kind: 'response',
      status: meta.s,
      headers: meta.h ?? [],
      body: Uint8Array.from(buffer.subarray(5 + metaLength)),
    };
    return stored;
  },
};
