/**
 * Request fingerprints: SHA-256 over a canonical encoding of the request, so that the same request always
 * gives the same fingerprint and a key reused for a different request is detected.
 *
 * - Plain data (objects, arrays, strings, numbers, booleans, null) is canonicalised like JSON with object
 *   keys sorted, so key order never matters; `undefined` members are dropped and `toJSON()` is honoured, as
 *   `JSON.stringify` does.
 * - `Uint8Array` (and `Buffer`) values are hashed as raw bytes, wherever they appear.
 * - A string with a lone surrogate (no UTF-8 form) is hashed by its UTF-16 code units, apart from every
 *   other string (UTF-8 would make each such string U+FFFD); every other string as UTF-8.
 * - An `ExactDecimal` (a JSON number a double would round, see `./exact-decimal.ts`) is hashed by its exact
 *   value, apart from every double.
 * @module
 */
import { createHash, hash } from 'node:crypto';
import { InvalidOptionsError } from './errors.js';
import { ExactDecimal } from './exact-decimal.js';
import { codeUnitsHex, isWellFormed } from './lone-surrogates.js';

/** A value that can be fingerprinted. */
export type FingerprintInput = unknown;

// Deepest nesting `createFingerprint` takes: its encoding recurses.
const MAX_DEPTH = 256;

// Each value is written as a one-letter type tag and, for variable-length values, a byte length, so the
// encoding is prefix-free: two different values can never produce the same byte stream. Parts are
// collected and hashed once (a single one-shot hash is much cheaper than many stream updates).
function feed(parts: Array<string | Uint8Array>, value: unknown, depth: number): void {
  if (depth > MAX_DEPTH) throw new InvalidOptionsError('fingerprint input is nested too deeply');
  if (value === null || value === undefined) {
    parts.push('n');
    return;
  }
  if (value instanceof Uint8Array) {
    parts.push(`b${value.byteLength}:`, value);
    return;
  }
  switch (typeof value) {
    case 'boolean':
      parts.push(value ? 't' : 'f');
      return;
    case 'number':
      // JSON has no NaN or Infinity (they become null) and no negative zero.
      parts.push(Number.isFinite(value) ? `d${JSON.stringify(value)};` : 'n');
      return;
    case 'string':
      parts.push(stringEncoding(value));
      return;
    case 'bigint':
      parts.push(`i${value.toString()};`);
      return;
    case 'object':
      feedObject(parts, value, depth);
      return;
    default:
      throw new InvalidOptionsError(`cannot fingerprint a value of type ${typeof value}`);
  }
}

/**
 * A string's encoding: `s`, its UTF-8 byte length and the string (hashed as UTF-8); a string with a lone
 * surrogate, which UTF-8 would write as U+FFFD (alike for every one), as `w`, its length and its code units
 * in hex (`./lone-surrogates.ts`). Every well-formed string keeps the encoding it always had.
 */
export function stringEncoding(value: string): string {
  return isWellFormed(value)
    ? `s${Buffer.byteLength(value, 'utf8')}:${value}`
    : `w${value.length}:${codeUnitsHex(value)}`;
}

function feedObject(parts: Array<string | Uint8Array>, value: object, depth: number): void {
  if (value instanceof ExactDecimal) {
    parts.push(`x${value.canonical};`);
    return;
  }
  const withToJSON = value as { toJSON?: () => unknown };
  if (typeof withToJSON.toJSON === 'function') {
    feed(parts, withToJSON.toJSON(), depth + 1);
    return;
  }
  if (Array.isArray(value)) {
    parts.push(`[${value.length}:`);
    for (const item of value) feed(parts, item, depth + 1);
    parts.push(']');
    return;
  }
  const entries = Object.entries(value)
    .filter(([, v]) => v !== undefined && typeof v !== 'function' && typeof v !== 'symbol')
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  parts.push(`{${entries.length}:`);
  for (const [k, v] of entries) {
    feed(parts, k, depth + 1);
    feed(parts, v, depth + 1);
  }
  parts.push('}');
}

/**
 * SHA-256 fingerprint (64 hex characters) of `input`.
 * @example
 * createFingerprint({ amount: 100, currency: 'EUR' }) === createFingerprint({ currency: 'EUR', amount: 100 });
 */
export function createFingerprint(input: FingerprintInput): string {
  const parts: Array<string | Uint8Array> = [];
  feed(parts, input, 0);
  return hashParts(parts);
}

// SHA-256 hex of the encoding's parts, in one shot when they are all text.
function hashParts(parts: Array<string | Uint8Array>): string {
  if (parts.every((part) => typeof part === 'string')) {
    return hash('sha256', (parts as string[]).join(''), 'hex');
  }
  const digest = createHash('sha256');
  for (const part of parts) digest.update(part);
  return digest.digest('hex');
}

// Whether `feedObject` would write `value` as what its `toJSON()` returns.
function hasToJSON(value: unknown): value is { toJSON(): unknown } {
  return (
    value !== null &&
    typeof value === 'object' &&
    !(value instanceof Uint8Array) &&
    !(value instanceof ExactDecimal) &&
    typeof (value as { toJSON?: unknown }).toJSON === 'function'
  );
}

// A marker on the work stack of `createDeepFingerprint`: write `text`, then leave `container` (no longer
// an ancestor of what follows).
class Close {
  constructor(
    readonly text: string,
    readonly container: object,
  ) {}
}

/**
 * The fingerprint {@link createFingerprint} gives, for a value nested at any depth: the same encoding,
 * written from a work stack instead of by recursion, so neither the depth limit nor the call stack bounds
 * it. For input that may be nested deeper than `createFingerprint` takes (a body a parser produced from a
 * client's JSON): a constant in its place would make every such input alike.
 * @throws InvalidOptionsError for a cycle (a value inside itself), or a value that cannot be fingerprinted.
 */
export function createDeepFingerprint(input: FingerprintInput): string {
  const parts: Array<string | Uint8Array> = [];
  const work: unknown[] = [input];
  // The objects and arrays being written: meeting one again inside itself is a cycle.
  const open = new Set<object>();
  while (work.length > 0) {
    let value = work.pop();
    if (value instanceof Close) {
      parts.push(value.text);
      open.delete(value.container);
      continue;
    }
    // `toJSON()` gives the value to write in its place, as in `feedObject` (each result a fresh object
    // with its own `toJSON` would never end: bounded as `createFingerprint` bounds it).
    for (let hops = 0; hasToJSON(value); hops++) {
      if (hops > MAX_DEPTH) throw new InvalidOptionsError('fingerprint input is nested too deeply');
      value = value.toJSON();
    }
    if (value === null || typeof value !== 'object' || value instanceof Uint8Array) {
      feed(parts, value, 0);
      continue;
    }
    if (value instanceof ExactDecimal) {
      parts.push(`x${value.canonical};`);
      continue;
    }
    if (open.has(value)) throw new InvalidOptionsError('fingerprint input contains a cycle');
    open.add(value);
    if (Array.isArray(value)) {
      parts.push(`[${value.length}:`);
      work.push(new Close(']', value));
      for (let i = value.length - 1; i >= 0; i--) work.push(value[i]);
      continue;
    }
    const entries = Object.entries(value)
      .filter(([, v]) => v !== undefined && typeof v !== 'function' && typeof v !== 'symbol')
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    parts.push(`{${entries.length}:`);
    work.push(new Close('}', value));
    for (let i = entries.length - 1; i >= 0; i--) {
      const [key, member] = entries[i] as [string, unknown];
      work.push(member, key);
    }
  }
  return hashParts(parts);
}
