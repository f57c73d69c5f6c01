/**
 * The request fingerprint: SHA-256 over the method, the path, the canonical query, selected headers and the
 * body. JSON bodies are canonicalised (object key order never matters; a number a double would round, such
 * as an int64 id, by its exact value: `./json-numbers.ts`), multipart bodies are compared part by
 * part without their random boundary (`./multipart.ts`); other bodies, and JSON bodies whose bytes are not
 * UTF-8, are compared as raw bytes. A `charset` parameter other than UTF-8 counts (`./charset.ts`), and a
 * JSON string value a parser produced is that string, not the JSON its text spells (`./string-body.ts`). A string with a lone surrogate, anywhere, and a query byte that is not
 * UTF-8 keep their own fingerprint rather than that of U+FFFD (`../core/lone-surrogates.ts`,
 * `./canonical-query.ts`). The function is total: any input gives a fingerprint, never an exception, so
 * hostile bodies can only ever produce a 422 (mismatch), never a 500.
 * @module
 */

import { isUtf8 } from 'node:buffer';
import { createHash, hash } from 'node:crypto';
import { bufferView } from '../core/bytes.js';
import { ExactDecimal } from '../core/exact-decimal.js';
import { createDeepFingerprint, createFingerprint, stringEncoding } from '../core/fingerprint.js';
import { generalisedUtf8 } from '../core/lone-surrogates.js';
import { canonicalQuery } from './canonical-query.js';
import { charsetOf } from './charset.js';
import { mayHoldRoundedNumber, parseJsonExactly } from './json-numbers.js';
import { multipartParts } from './multipart.js';

/** What the fingerprint covers. */
export interface FingerprintParts {
  /** Request method, any case. */
  method: string;
  /** The request path, without the query string. */
  path: string;
  /** The raw query string, with or without the leading `?`. */
  query: string;
  /** The request's `content-type`, if any. */
  contentType?: string | undefined;
  /** Values of the headers the route fingerprints (e.g. an API version), by lower-case name. */
  headers?: Readonly<Record<string, string | undefined>>;
  /**
   * The body: raw bytes (`Uint8Array`), a string, or a value a body parser already produced (an object, an
   * array…), or `undefined` when the request has none.
   */
  body: unknown;
  /**
   * The body's bytes as received, when the app kept them beside a parsed `body` (Express `express.json`'s
   * `verify`, Fastify's `fastify-raw-body`): preferred for a JSON body, because parsing rounds numbers a
   * double cannot hold (an int64 id), after which two different requests would fingerprint alike; and
   * used for a body of any type when `body` is empty (`undefined`, `null`, `''`, `{}`): the app kept the
   * bytes there and no parser left them anywhere else.
   */
  rawBody?: Uint8Array | string | undefined;
  /**
   * What a string `body` under a JSON type is: `'text'` (the default), the JSON text itself, read as JSON
   * (key order and whitespace do not count); `'value'`, a JSON string a parser produced from a body such
   * as `"123"` (Fastify's JSON parser, `express.json({ strict: false })`), which is that string, not the
   * JSON its text would parse to: `"123"` and `123`, or `"{\"a\":1}"` and `{"a":1}`, differ. The
   * adapters tell them apart by the body's length (`./string-body.ts`).
   */
  stringBody?: 'text' | 'value' | undefined;
}

export { canonicalQuery } from './canonical-query.js';

const FINGERPRINT_VERSION = 'http/1';

// The media type as hashed: with the charset when it is not UTF-8 (`./charset.ts`). No media type has a
// `;`, so a request without the parameter keeps the fingerprint it always had.
function hashedMedia(media: string, charset: string): string {
  return charset === '' ? media : `${media};charset=${charset}`;
}

// The media type: what comes before any parameters, trimmed and lower-cased (`split(';')[0]`, without the
// array).
function mediaType(contentType: string | undefined): string {
  if (contentType === undefined) return '';
  const semicolon = contentType.indexOf(';');
  return (semicolon === -1 ? contentType : contentType.slice(0, semicolon)).trim().toLowerCase();
}

/**
 * The `rawBody` an app keeps on its request (`express.json({ verify: keepRawBody })`, fastify-raw-body, a
 * content-type parser of its own), when it is bytes or text: what {@link FingerprintParts.rawBody} takes.
 */
export function keptRawBody(request: object): Uint8Array | string | undefined {
  const raw = (request as { rawBody?: unknown }).rawBody;
  return raw instanceof Uint8Array || typeof raw === 'string' ? raw : undefined;
}

const isJsonMedia = (media: string): boolean =>
  media === 'application/json' || media.endsWith('+json');

/**
 * Whether the fingerprint reads a body of this `content-type` as JSON (`application/json`, `*+json`):
 * for an adapter to know when the JSON text is worth keeping.
 * @example
 * isJsonContentType('application/merge-patch+json; charset=utf-8'); // true
 */
export function isJsonContentType(contentType: string | undefined): boolean {
  return isJsonMedia(mediaType(contentType));
}

/**
 * The fingerprint (64 hex characters) of a request.
 * @example
 * httpFingerprint({ method: 'POST', path: '/orders', query: '', contentType: 'application/json', body: raw });
 */
export function httpFingerprint(parts: FingerprintParts): string {
  const media = mediaType(parts.contentType);
  const headers =
    parts.headers === undefined
      ? []
      : Object.entries(parts.headers)
          .filter((entry): entry is [string, string] => entry[1] !== undefined)
          .map(([name, value]) => [name.toLowerCase(), value] as const)
          .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const method = parts.method.toUpperCase();
  const query = canonicalQuery(parts.query);
  const hashed = hashedMedia(media, charsetOf(parts.contentType));
  try {
    // The same bytes `createFingerprint(base + body)` hashes (below), written directly: one string instead
    // of an array of parts, and no wrapper objects to canonicalise.
    const encoder = new Encoder();
    encoder.text = '[7:';
    encoder.string(FINGERPRINT_VERSION);
    encoder.string(method);
    encoder.string(parts.path);
    encoder.pairs(query);
    encoder.pairs(headers);
    encoder.string(hashed);
    encoder.body(bodyOf(parts, media), media, parts.contentType, isJsonStringValue(parts, media));
    encoder.text += ']';
    return encoder.digest();
  } catch {
    // A value the encoder refuses: nested deeper than it goes (a parser before the layer hands over any
    // depth). The same encoding without the limit, or JSON text as its bytes (as distinct, and cheaper
    // than parsing it again). Not the body's JSON.stringify text: that overflows the stack some thousands
    // of levels deep, and every such body would share one fingerprint (a key reused for another body
    // replayed, not 422). Only a value no encoding takes (a cycle) gets a constant.
    const body = bodyOf(parts, media);
    const base = [FINGERPRINT_VERSION, method, parts.path, query, headers, hashed];
    try {
      return createDeepFingerprint([
        ...base,
        typeof body === 'string' || body instanceof Uint8Array
          ? { bytes: typeof body === 'string' ? generalisedUtf8(body) : body }
          : { json: body },
      ]);
    } catch {
      return createFingerprint([...base, { text: '<unserialisable body>' }]);
    }
  }
}

let warnedRoundedIntegers = false;

// Once per process: the cause is the app's wiring (a JSON parser before the layer, no raw text kept).
function warnRoundedIntegers(): void {
  if (warnedRoundedIntegers) return;
  warnedRoundedIntegers = true;
  process.emitWarning(
    'idempotency-kit: a JSON request body parsed before the layer holds an integer beyond 2^53, which the ' +
      'parser rounded: two requests whose ids differ there fingerprint alike, so a key reused for the other ' +
      'id is replayed instead of refused with 422. Keep the raw text as req.rawBody (express.json({ verify: keepRawBody })), or ' +
      'register the Fastify plugin with { keepJsonText: true } (a Fastify transactionalRoute: its keepJsonText ' +
      "as the route's preParsing hook), and the fingerprint reads the numbers exactly.",
    { code: 'IDEMPOTENCY_KIT_ROUNDED_JSON' },
  );
}

// The raw JSON text when the app kept it (numbers exact), else the body as handed over; the bytes the app
// kept, whatever their type, when no parser left anything of them in the body (a middleware that reads
// the stream into `req.rawBody` only, a content-type parser that keeps the text and calls `done(null)`):
// the handler reads them there, and a fingerprint of the empty body would make every such request alike.
function bodyOf(parts: FingerprintParts, media: string): unknown {
  const raw = parts.rawBody;
  if (raw === undefined || raw.length === 0) return parts.body;
  return isJsonMedia(media) || isEmptyBody(parts.body) ? raw : parts.body;
}

// A string a parser made of a JSON string body (`"123"`), rather than the JSON text: the parsed body (not
// text the app kept, which `bodyOf` takes over it under a JSON type), under a JSON type, and said to be one.
function isJsonStringValue(parts: FingerprintParts, media: string): boolean {
  const { body, rawBody } = parts;
  if (parts.stringBody !== 'value' || typeof body !== 'string') return false;
  return (rawBody === undefined || rawBody.length === 0) && isJsonMedia(media);
}

// No body, or the empty one a parser sets when it reads nothing (`{}` from Express 4's body-parser).
function isEmptyBody(body: unknown): boolean {
  if (body === undefined || body === null) return true;
  if (typeof body === 'string' || body instanceof Uint8Array) return body.length === 0;
  if (typeof body !== 'object' || Array.isArray(body)) return false;
  for (const _ in body) return false;
  const prototype = Object.getPrototypeOf(body) as unknown;
  return prototype === Object.prototype || prototype === null;
}

/**
 * Sort object keys in place by UTF-16 code units, as `Array.prototype.sort()` does with no comparator:
 * insertion sort for the few keys of a usual request body, where the built-in sort allocates its working
 * state (some 800 bytes per call, measured with V8's sampling heap profiler on Express S2).
 */
function sortKeys(keys: string[]): void {
  if (keys.length > 16) {
    keys.sort();
    return;
  }
  for (let i = 1; i < keys.length; i++) {
    const key = keys[i] as string;
    let j = i - 1;
    while (j >= 0 && (keys[j] as string) > key) {
      keys[j + 1] = keys[j] as string;
      j--;
    }
    keys[j + 1] = key;
  }
}

/**
 * Writes the canonical encoding of `createFingerprint` (core/fingerprint.ts) and hashes it. It must stay
 * byte for byte the same, or every stored key would turn into a mismatch: a property test checks it
 * against `createFingerprint` itself. Each value is a one-letter tag and, for variable-length values, a byte
 * length; object keys are sorted; `undefined`, functions and symbols are left out of objects.
 */
class Encoder {
  /** The encoding since the last raw byte chunk. */
  text = '';
  /** Earlier text and raw byte chunks, only when the body has bytes. */
  private chunks: Array<string | Uint8Array> | undefined;
  /** While a JSON value a body parser produced is written: warn of integers it must have rounded. */
  private watchUnsafeIntegers = false;

  string(value: string): void {
    this.text += stringEncoding(value);
  }

  pairs(pairs: ReadonlyArray<readonly [string, string]>): void {
    this.text += `[${pairs.length}:`;
    for (const [name, value] of pairs) {
      this.text += '[2:';
      this.string(name);
      this.string(value);
      this.text += ']';
    }
    this.text += ']';
  }

  /**
   * The body part, at depth 1 of the encoding: `null` when there is none, `{ json: value }` for a JSON
   * value (parsed here from bytes, or already parsed by the framework), `{ multipart: parts }` for a
   * well-formed multipart body (each part `[headers, content]`, see `./multipart.ts`), `{ bytes }`
   * otherwise. Tagged so that a JSON string body and the same text sent as bytes stay distinct. The
   * one-member wrapper objects are written directly rather than built and then canonicalised.
   */
  body(
    body: unknown,
    media: string,
    contentType: string | undefined,
    jsonStringValue = false,
  ): void {
    if (body === undefined || body === null) {
      this.text += 'n';
      return;
    }
    if (body instanceof Uint8Array || typeof body === 'string') {
      // Text as its bytes: UTF-8, and a lone surrogate (text a parser decoded as UTF-16) as the bytes of
      // its code point, which no UTF-8 text has, not as U+FFFD (`../core/lone-surrogates.ts`).
      const bytes = typeof body === 'string' ? generalisedUtf8(body) : body;
      if (bytes.byteLength === 0) {
        this.text += 'n';
        return;
      }
      if (isJsonMedia(media)) {
        // Text is parsed as it is (its bytes decoded would turn a lone surrogate into U+FFFD): the same
        // string as the bytes' UTF-8 decoding for any other text.
        const text = typeof body === 'string' ? body : bufferView(bytes).toString('utf8');
        // Bytes that are not UTF-8 (`{"note":"\xff"}`): decoding writes U+FFFD for each such sequence, so
        // `\xff`, `\xfe` and a written U+FFFD would parse alike and a key reused for the other body be
        // replayed. Compared as the bytes they are, as JSON that does not parse is: different bytes
        // differ, the same bytes (a retry) match. Not decoded with each byte kept as a lone surrogate
        // U+DC80+byte, as the query is (`./canonical-query.ts`): a JSON escape gives any lone surrogate
        // too, so `{"note":"\xff"}` would read as `{"note":"\udcff"}`, another request (the handler's
        // parser reads U+FFFD in one, U+DCFF in the other). Key order and whitespace then count, for such
        // bodies only; every UTF-8 body is read as before and keeps its fingerprint. The bytes are checked
        // only when the text holds U+FFFD (the decoder writes one for every such sequence): most bodies
        // are spared a second pass over them.
        if (typeof body !== 'string' && text.includes('\ufffd') && !isUtf8(bytes)) {
          this.member('bytes', bytes);
          return;
        }
        let parsed: unknown;
        try {
          parsed = JSON.parse(text) as unknown;
        } catch {
          // Not valid JSON after all: compare the bytes, and let the handler answer the parse error.
          this.member('bytes', bytes);
          return;
        }
        if (jsonStringValue) {
          // The parser's string value, whose text happens to be JSON too (`"123"`): that string, not the
          // 123 a body `123` is. Under a tag of its own, not `json`: JSON text the length check misreads
          // as a value (`express.text()` reading a chunked or BOM-led `{"amount":100}`) would otherwise
          // hash as the string body `"{\"amount\":100}"` parses to, and one be replayed the other's
          // answer. Tagged, it matches only the same text read the same way. Text that is not JSON stays
          // its bytes above, as it always was.
          this.member('jsonString', body);
          return;
        }
        // A number parsing may have rounded (an int64 id) could make two requests alike: such a body (rare)
        // is read again, keeping the numbers that do not parse exactly as they were written (patched into
        // `parsed`). JSON.parse has checked the text first, which the exact reader relies on.
        this.member('json', mayHoldRoundedNumber(text) ? parseJsonExactly(text, parsed) : parsed);
        return;
      }
      if (media.startsWith('multipart/') && contentType !== undefined) {
        // Not well-formed with its boundary: compare the bytes, and let the handler answer.
        const multipart = multipartParts(bytes, contentType);
        this.member(multipart === undefined ? 'bytes' : 'multipart', multipart ?? bytes);
        return;
      }
      this.member('bytes', bytes);
      return;
    }
    // Parsed before the layer: a number beyond 2^53 was rounded there, and two ids may now look alike.
    this.watchUnsafeIntegers = isJsonMedia(media);
    this.member('json', body);
    this.watchUnsafeIntegers = false;
  }

  // `{ [name]: value }` at depth 1: a member whose value objects leave out is an empty object.
  private member(name: string, value: unknown): void {
    if (value === undefined || typeof value === 'function' || typeof value === 'symbol') {
      this.text += '{0:}';
      return;
    }
    this.text += '{1:';
    this.string(name);
    this.value(value, 2);
    this.text += '}';
  }

  value(value: unknown, depth: number): void {
    if (depth > 256) throw new Error('nested too deeply');
    if (value === null || value === undefined) {
      this.text += 'n';
      return;
    }
    if (value instanceof Uint8Array) {
      this.text += `b${value.byteLength}:`;
      this.chunks ??= [];
      this.chunks.push(this.text, value);
      this.text = '';
      return;
    }
    switch (typeof value) {
      case 'boolean':
        this.text += value ? 't' : 'f';
        return;
      case 'number':
        if (this.watchUnsafeIntegers && Number.isInteger(value) && !Number.isSafeInteger(value)) {
          warnRoundedIntegers();
        }
        // A finite number's string form is the one JSON.stringify gives (negative zero included).
        this.text += Number.isFinite(value) ? `d${value};` : 'n';
        return;
      case 'string':
        this.string(value);
        return;
      case 'bigint':
        this.text += `i${value.toString()};`;
        return;
      case 'object':
        this.object(value, depth);
        return;
      default:
        throw new Error(`cannot fingerprint a value of type ${typeof value}`);
    }
  }

  private object(value: object, depth: number): void {
    if (value instanceof ExactDecimal) {
      this.text += `x${value.canonical};`;
      return;
    }
    const withToJSON = value as { toJSON?: () => unknown };
    if (typeof withToJSON.toJSON === 'function') {
      this.value(withToJSON.toJSON(), depth + 1);
      return;
    }
    if (Array.isArray(value)) {
      this.text += `[${value.length}:`;
      for (const item of value) this.value(item, depth + 1);
      this.text += ']';
      return;
    }
    // The members, sorted by key in UTF-16 code units (the default sort of strings), each value read once,
    // as flat [key, value, …] pairs rather than an array per entry.
    const record = value as Record<string, unknown>;
    const keys = Object.keys(record);
    if (keys.length > 1) sortKeys(keys);
    const members: unknown[] = [];
    for (const key of keys) {
      const member = record[key];
      if (member !== undefined && typeof member !== 'function' && typeof member !== 'symbol') {
        members.push(key, member);
      }
    }
    this.text += `{${members.length / 2}:`;
    for (let i = 0; i < members.length; i += 2) {
      this.string(members[i] as string);
      this.value(members[i + 1], depth + 1);
    }
    this.text += '}';
  }

  digest(): string {
    if (this.chunks === undefined) return hash('sha256', this.text, 'hex');
    const digest = createHash('sha256');
    for (const chunk of this.chunks) digest.update(chunk);
    digest.update(this.text);
    return digest.digest('hex');
  }
}
