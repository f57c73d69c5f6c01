/**
 * The query string as the fingerprint reads it: decoded as `URLSearchParams` decodes it
 * (`application/x-www-form-urlencoded`: `+` is a space, percent-escapes are UTF-8) and sorted by name.
 *
 * `URLSearchParams` writes U+FFFD for every byte sequence that is not UTF-8 (`%FF`, `%ED%A0%80`) and for
 * a lone surrogate in the string, so `?memo=%FF`, `?memo=%FE` and `?memo=%EF%BF%BD` would read alike,
 * while an app reading its query with `qs` (Express 4's default) sees `'%FF'`, `'%FE'` and `'\uFFFD'`: a
 * key reused for another such request would be replayed the first one's answer. A query holding such a
 * sequence is decoded again with each byte that is not part of a UTF-8 character kept as a lone surrogate
 * U+DC80–U+DCFF (Python's `surrogateescape`), which no valid decoding gives, so every byte sequence reads
 * its own way. Every other query reads as before, and keeps its fingerprint.
 * @module
 */
import { isUtf8 } from 'node:buffer';
import { generalisedUtf8, isWellFormed } from '../core/lone-surrogates.js';

/**
 * The query string in a canonical form: parameters sorted by name (a stable sort, so repeated parameters
 * keep their relative order, which can carry meaning). Bytes that are not UTF-8 are kept as lone
 * surrogates U+DC80–U+DCFF, one per byte, instead of U+FFFD.
 * @example
 * canonicalQuery('?b=1&a=caf%C3%A9'); // [['a', 'café'], ['b', '1']]
 */
export function canonicalQuery(query: string): Array<[string, string]> {
  if (query === '' || query === '?') return [];
  const raw = query.startsWith('?') ? query.slice(1) : query;
  let params = [...new URLSearchParams(raw)];
  // U+FFFD in the result: written there, or a replaced byte or surrogate (read again to know which).
  if (!isWellFormed(raw) || (raw.includes('%') && params.some(holdsReplacement))) {
    params = exactParams(raw) ?? params;
  }
  return params.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}

const holdsReplacement = ([name, value]: [string, string]): boolean =>
  name.includes('\ufffd') || value.includes('\ufffd');

// The form-urlencoded parser of the URL standard, with `surrogateEscaped` as its last step instead of
// UTF-8 decoding with replacement; `undefined` when every name and value is UTF-8, so that such a query
// reads exactly as before (Node's URLSearchParams, even where it writes U+FFFD for a literal non-ASCII
// character after a `%`, which no request Node's HTTP parser accepts holds).
function exactParams(raw: string): Array<[string, string]> | undefined {
  const params: Array<[string, string]> = [];
  let escaped = false;
  const decode = (component: string): string => {
    const bytes = percentDecode(generalisedUtf8(component.replaceAll('+', ' ')));
    if (isUtf8(bytes)) return bytes.toString('utf8');
    escaped = true;
    return surrogateEscaped(bytes);
  };
  for (const sequence of raw.split('&')) {
    if (sequence === '') continue;
    const equals = sequence.indexOf('=');
    const name = equals === -1 ? sequence : sequence.slice(0, equals);
    const value = equals === -1 ? '' : sequence.slice(equals + 1);
    params.push([decode(name), decode(value)]);
  }
  return escaped ? params : undefined;
}

const hexValue = (byte: number | undefined): number => {
  if (byte === undefined) return -1;
  if (byte >= 0x30 && byte <= 0x39) return byte - 0x30;
  const lower = byte | 0x20;
  return lower >= 0x61 && lower <= 0x66 ? lower - 0x57 : -1;
};

// `%` and two hex digits is that byte; any other `%` is itself.
function percentDecode(bytes: Buffer): Buffer {
  const out = Buffer.allocUnsafe(bytes.length);
  let length = 0;
  for (let i = 0; i < bytes.length; i++) {
    const byte = bytes[i] as number;
    const high = byte === 0x25 ? hexValue(bytes[i + 1]) : -1;
    const low = high === -1 ? -1 : hexValue(bytes[i + 2]);
    if (low === -1) {
      out[length++] = byte;
      continue;
    }
    out[length++] = high * 16 + low;
    i += 2;
  }
  return out.subarray(0, length);
}

// Each UTF-8 character as itself, each other byte (always 0x80 or above) as U+DC00 + byte: one way to
// read any bytes, and a different string for different bytes.
function surrogateEscaped(bytes: Buffer): string {
  let text = '';
  for (let i = 0; i < bytes.length; ) {
    const lead = bytes[i] as number;
    const size = lead < 0x80 ? 1 : lead < 0xe0 ? 2 : lead < 0xf0 ? 3 : 4;
    const character = bytes.subarray(i, i + size);
    if (character.length === size && isUtf8(character)) {
      text += character.toString('utf8');
      i += size;
    } else {
      text += String.fromCharCode(0xdc00 + lead);
      i++;
    }
  }
  return text;
}
