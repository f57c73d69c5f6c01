/**
 * The stored form of an HTTP response: its status, the allow-listed headers and the body bytes, or a
 * marker saying the response was too large to keep, or went out around the capture. Used as the engine's outcome codec.
 * @module
 */
import { bufferView } from '../core/bytes.js';
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

/**
 * The handler's response reached the client without passing through the capture (Express: a response
 * ended through a prototype chain without the adapter's hooks), its body stream failed part-way (`cut`),
 * or a timeout answered while the handler ran on (`timedOut`), so its bytes are unknown: it was sent once
 * and not kept.
 */
export interface NotCapturedMarker {
  kind: 'not_captured';
  /** Status of the response that was sent. */
  status: number;
  /**
   * The handler answered with a body stream that failed before its end: the client got its status and
   * head, then a cut body. Absent for a response that went around the capture.
   */
  cut?: true;
  /**
   * A timeout answered (`status`) while the handler ran on (Fastify's `handlerTimeout`, Express's
   * `connect-timeout`, `hono/timeout`): the handler's own outcome is unknown. Absent otherwise.
   */
  timedOut?: true;
}

/** What an HTTP execution stores. */
export type HttpOutcome = StoredResponse | TooLargeMarker | NotCapturedMarker;

const VERSION = 0x68; // 'h'

interface Meta {
  k: 'r' | 't' | 'u';
  s: number;
  h?: Array<[string, string]>;
  n?: number;
  /**
   * 1 on a `not_captured` marker whose body stream failed (`cut`). An optional field, not a new kind: a
   * release before it reads such a record as the `not_captured` marker it is (a rolling deploy answers
   * the same 409, only with the older detail).
   */
  c?: 1;
  /**
   * 1 on a `not_captured` marker kept for a timeout's answer (`timedOut`). Optional, as `c` is: a release
   * before it reads the same 409, with the older detail.
   */
  o?: 1;
}

// Replays of one key decode the same metadata again and again: keep the last few parsed, by their text
// (the same text always parses to the same value, so an entry can never be stale). Entries are frozen,
// since every replay of the key shares them.
const MAX_PARSED = 256;
const MAX_PARSED_LENGTH = 1024;
const parsed = new Map<string, Meta>();

function parseMeta(text: string): Meta {
  if (text.length > MAX_PARSED_LENGTH) return JSON.parse(text) as Meta;
  let meta = parsed.get(text);
  if (meta === undefined) {
    meta = JSON.parse(text) as Meta;
    if (meta.h !== undefined) {
      for (const pair of meta.h) Object.freeze(pair);
      Object.freeze(meta.h);
    }
    Object.freeze(meta);
    if (parsed.size >= MAX_PARSED) parsed.clear();
    parsed.set(text, meta);
  }
  return meta;
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
        : outcome.kind === 'too_large'
          ? { k: 't', s: outcome.status, n: outcome.bytes }
          : outcome.cut === true
            ? { k: 'u', s: outcome.status, c: 1 }
            : outcome.timedOut === true
              ? { k: 'u', s: outcome.status, o: 1 }
              : { k: 'u', s: outcome.status };
    const json = JSON.stringify(meta);
    const metaLength = Buffer.byteLength(json, 'utf8');
    const bodyLength = outcome.kind === 'response' ? outcome.body.byteLength : 0;
    // One buffer, written in place (the engine copies it into its envelope, so a pooled one is fine).
    const out = Buffer.allocUnsafe(5 + metaLength + bodyLength);
    out[0] = VERSION;
    out.writeUInt32BE(metaLength, 1);
    out.write(json, 5, metaLength, 'utf8');
    if (outcome.kind === 'response') out.set(outcome.body, 5 + metaLength);
    return out;
  },
  decode(bytes) {
    const buffer = bufferView(bytes);
    if (buffer[0] !== VERSION) throw new Error(`Unknown HTTP outcome version ${String(buffer[0])}`);
    const metaLength = buffer.readUInt32BE(1);
    const meta = parseMeta(buffer.toString('utf8', 5, 5 + metaLength));
    if (meta.k === 't') return { kind: 'too_large', status: meta.s, bytes: meta.n ?? 0 };
    if (meta.k === 'u') {
      if (meta.c === 1) return { kind: 'not_captured', status: meta.s, cut: true };
      return meta.o === 1
        ? { kind: 'not_captured', status: meta.s, timedOut: true }
        : { kind: 'not_captured', status: meta.s };
    }
    const stored: StoredResponse = {
      kind: 'response',
      status: meta.s,
      headers: meta.h ?? [],
      // A view of the stored bytes, not a copy: replays only read it, and stored outcomes never change.
      body: new Uint8Array(
        bytes.buffer,
        bytes.byteOffset + 5 + metaLength,
        bytes.byteLength - 5 - metaLength,
      ),
    };
    return stored;
  },
};
