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
 *
 * Sorting by name assumes that parameters of different names are independent. To a `qs`-style parser
 * (Express 4's default, Express 5's `'extended'`, Fastify with `qs` as its `querystringParser`) the names
 * that share a base before a bracket (`ids`, `ids[]`, `ids[0]`, `ids[x]`) build one value in the order they
 * came: `?ids=1&ids[]=2` is `['1', '2']`, `?ids[]=2&ids=1` is `['2', '1']`, and both sorted to one query, so
 * a key reused for the other order was replayed the first one's answer. Such a query, when its parameters
 * of one base are not in name order, keeps their order instead ({@link orderedByBase}).
 * @module
 */
import { isUtf8 } from 'node:buffer';
import { generalisedUtf8, isWellFormed } from '../core/lone-surrogates.js';

/**
 * The query string in a canonical form: parameters sorted by name (a stable sort, so repeated parameters
 * keep their relative order, which can carry meaning); when bracketed parameters of one base (`ids`,
 * `ids[]`) are out of name order, sorted by that base instead, each base's parameters in their order.
 * Bytes that are not UTF-8 are kept as lone surrogates U+DC80–U+DCFF, one per byte, instead of U+FFFD.
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
  return outOfOrderWithinBase(params)
    ? orderedByBase(params)
    : params.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}

// The name before its first bracket (`ids` of `ids[]`, `ids[0][x]`): what a `qs`-style parser keys the
// value by. The whole name when it has none.
const baseOf = (name: string): string => {
  const bracket = name.indexOf('[');
  return bracket === -1 ? name : name.slice(0, bracket);
};

// Whether two parameters of one base, one of them bracketed, came out of name order (`ids[]` before `ids`,
// `a[y]` before `a[x]`). Any other query, among them every query without a bracket, is sorted by name as it
// always was, and keeps its fingerprint.
function outOfOrderWithinBase(params: ReadonlyArray<[string, string]>): boolean {
  if (!params.some(([name]) => name.includes('['))) return false;
  const last = new Map<string, string>();
  for (const [name] of params) {
    const base = baseOf(name);
    const before = last.get(base);
    if (before !== undefined && name < before) return true;
    last.set(base, name);
  }
  return false;
}

// Sorted by base name (stable), each base's parameters in the order they came: what a `qs`-style parser
// makes of them. Never the form of a query sorted by name (one base's names are out of order here), so
// no request whose query sorts by name is read as this one.
function orderedByBase(params: Array<[string, string]>): Array<[string, string]> {
  return params
    .map((param) => ({ param, base: baseOf(param[0]) }))
    .sort((a, b) => (a.base < b.base ? -1 : a.base > b.base ? 1 : 0))
    .map(({ param }) => param);
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
