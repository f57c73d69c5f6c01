/**
 * Request fingerprints: SHA-256 over a canonical encoding of the request, so that the same request always
 * gives the same fingerprint and a key reused for a different request is detected.
 *
 * - Plain data (objects, arrays, strings, numbers, booleans, null) is canonicalised like JSON with object
 *   keys sorted, so key order never matters; `undefined` members are dropped and `toJSON()` is honoured, as
 *   `JSON.stringify` does.
 * - `Uint8Array` (and `Buffer`) values are hashed as raw bytes, wherever they appear.
 * @module
 */
import { createHash, type Hash } from 'node:crypto';
import { InvalidOptionsError } from './errors.js';

/** A value that can be fingerprinted. */
export type FingerprintInput = unknown;

// Each value is written as a one-letter type tag and, for variable-length values, a byte length, so the
// encoding is prefix-free: two different values can never produce the same byte stream.
function feed(hash: Hash, value: unknown, depth: number): void {
  if (depth > 256) throw new InvalidOptionsError('fingerprint input is nested too deeply');
  if (value === null || value === undefined) {
    hash.update('n');
    return;
  }
  if (value instanceof Uint8Array) {
    hash.update(`b${value.byteLength}:`).update(value);
    return;
  }
  switch (typeof value) {
    case 'boolean':
      hash.update(value ? 't' : 'f');
      return;
    case 'number':
      // JSON has no NaN or Infinity (they become null) and no negative zero.
      hash.update(Number.isFinite(value) ? `d${JSON.stringify(value)};` : 'n');
      return;
    case 'string': {
      const bytes = Buffer.from(value, 'utf8');
      hash.update(`s${bytes.byteLength}:`).update(bytes);
      return;
    }
    case 'bigint':
      hash.update(`i${value.toString()};`);
      return;
    case 'object':
      feedObject(hash, value, depth);
      return;
    default:
      throw new InvalidOptionsError(`cannot fingerprint a value of type ${typeof value}`);
  }
}

function feedObject(hash: Hash, value: object, depth: number): void {
  const withToJSON = value as { toJSON?: () => unknown };
  if (typeof withToJSON.toJSON === 'function') {
    feed(hash, withToJSON.toJSON(), depth + 1);
    return;
  }
  if (Array.isArray(value)) {
    hash.update(`[${value.length}:`);
    for (const item of value) feed(hash, item, depth + 1);
    hash.update(']');
    return;
  }
  const entries = Object.entries(value)
    .filter(([, v]) => v !== undefined && typeof v !== 'function' && typeof v !== 'symbol')
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  hash.update(`{${entries.length}:`);
  for (const [k, v] of entries) {
    feed(hash, k, depth + 1);
    feed(hash, v, depth + 1);
  }
  hash.update('}');
}

/**
 * SHA-256 fingerprint (64 hex characters) of `input`.
 * @example
 * createFingerprint({ amount: 100, currency: 'EUR' }) === createFingerprint({ currency: 'EUR', amount: 100 });
 */
export function createFingerprint(input: FingerprintInput): string {
  const hash = createHash('sha256');
  feed(hash, input, 0);
  return hash.digest('hex');
}
