/**
 * The versioned envelope around a stored outcome: one version byte, one kind byte (a value or a stored
 * error), then the payload. Values are encoded by an {@link OutcomeCodec}; the default handles JSON data,
 * `undefined` and raw bytes.
 * @module
 */
import { describeError } from './describe-error.js';
import type { StoredErrorInfo } from './errors.js';

/** Turns a handler's result into bytes for the store, and back on replay. */
export interface OutcomeCodec {
  /** Encode a value for storage. */
  encode(value: unknown): Uint8Array;
  /**
   * Decode stored bytes; must give back what `encode` was given (byte-exact for binary data). `bytes` may
   * be the very bytes the engine's cache (or the memory store) keeps for every later replay: return a
   * new value (copy binary data, as the default codec does), never a view of `bytes`, or a caller that
   * changes one replay's value changes every later replay of the key.
   */
  decode(bytes: Uint8Array): unknown;
}

const ENVELOPE_VERSION = 1;
const KIND_VALUE = 0;
const KIND_ERROR = 1;

// Tags of the default codec's first byte.
const TAG_JSON = 0x6a; // 'j'
const TAG_BYTES = 0x62; // 'b'
const TAG_UNDEFINED = 0x75; // 'u'

/**
 * The default codec: `Uint8Array` values round-trip byte-exact, `undefined` stays `undefined`, and anything
 * else goes through JSON (so `Date` becomes a string, as with any JSON API).
 */
export const defaultCodec: OutcomeCodec = {
  encode(value) {
    if (value === undefined) return Uint8Array.of(TAG_UNDEFINED);
    if (value instanceof Uint8Array) {
      const out = new Uint8Array(value.byteLength + 1);
      out[0] = TAG_BYTES;
      out.set(value, 1);
      return out;
    }
    const text: string | undefined = JSON.stringify(value);
    // A function or a symbol has no JSON form: say so, rather than fail obscurely in Buffer.from.
    if (text === undefined) throw new TypeError(`a ${typeof value} cannot be encoded as JSON`);
    const json = Buffer.from(text, 'utf8');
    const out = new Uint8Array(json.byteLength + 1);
    out[0] = TAG_JSON;
    out.set(json, 1);
    return out;
  },
  decode(bytes) {
    const body = bytes.subarray(1);
    switch (bytes[0]) {
      case TAG_UNDEFINED:
        return undefined;
      case TAG_BYTES:
        return Uint8Array.from(body);
      case TAG_JSON:
        return JSON.parse(Buffer.from(body).toString('utf8'));
      default:
        throw new Error(`Unknown outcome tag ${String(bytes[0])}`);
    }
  },
};

/** A decoded envelope: a value's bytes, or a stored error. */
export type DecodedOutcome =
  | { kind: 'value'; payload: Uint8Array }
  | { kind: 'error'; error: StoredErrorInfo };

function wrap(kind: number, payload: Uint8Array): Uint8Array {
  const out = new Uint8Array(payload.byteLength + 2);
  out[0] = ENVELOPE_VERSION;
  out[1] = kind;
  out.set(payload, 2);
  return out;
}

/** Wrap an encoded value in the envelope. */
export function encodeValueOutcome(payload: Uint8Array): Uint8Array {
  return wrap(KIND_VALUE, payload);
}

/**
 * Wrap an error, kept as its name, message and string code (see {@link describeError}: bounded, and
 * total, so that whatever was thrown the key still gets its final outcome), in the envelope.
 */
export function encodeErrorOutcome(error: unknown): Uint8Array {
  return wrap(KIND_ERROR, Buffer.from(JSON.stringify(describeError(error)), 'utf8'));
}

/** Open an envelope. */
export function decodeOutcome(bytes: Uint8Array): DecodedOutcome {
  if (bytes[0] !== ENVELOPE_VERSION) {
    throw new Error(`Unsupported outcome envelope version ${String(bytes[0])}`);
  }
  const payload = bytes.subarray(2);
  if (bytes[1] === KIND_ERROR) {
    return { kind: 'error', error: JSON.parse(Buffer.from(payload).toString('utf8')) };
  }
  return { kind: 'value', payload };
}
