/**
 * The request fingerprint: SHA-256 over the method, the path, the canonical query, selected headers and the
 * body. JSON bodies are canonicalised (object key order never matters); other bodies are compared as raw
 * bytes. The function is total: any input gives a fingerprint, never an exception, so hostile bodies can
 * only ever produce a 422 (mismatch), never a 500.
 * @module
 */
import { createHash, hash } from 'node:crypto';
import { createFingerprint } from '../core/fingerprint.js';

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
}

const FINGERPRINT_VERSION = 'http/1';

/**
 * The query string in a canonical form: parameters sorted by name (a stable sort, so repeated parameters
 * keep their relative order, which can carry meaning).
 */
export function canonicalQuery(query: string): Array<[string, string]> {
  if (query === '' || query === '?') return [];
  const params = [...new URLSearchParams(query.startsWith('?') ? query.slice(1) : query)];
  return params.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}

function isJsonType(contentType: string | undefined): boolean {
  if (contentType === undefined) return false;
  const media = contentType.split(';')[0]?.trim().toLowerCase() ?? '';
  return media === 'application/json' || media.endsWith('+json');
}

// The body part of the fingerprint: a canonical JSON value when the body is JSON (parsed here from bytes,
// or already parsed by the framework), raw bytes otherwise. Tagged so that a JSON string body and the
// same text sent as bytes stay distinct.
function bodyPart(body: unknown, contentType: string | undefined): unknown {
  if (body === undefined || body === null) return null;
  if (body instanceof Uint8Array || typeof body === 'string') {
    const bytes = typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
    if (bytes.byteLength === 0) return null;
    if (isJsonType(contentType)) {
      try {
        const text = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8');
        return { json: JSON.parse(text) as unknown };
      } catch {
        // Not valid JSON after all: compare the bytes, and let the handler answer the parse error.
      }
    }
    return { bytes };
  }
  return { json: body };
}

/**
 * The fingerprint (64 hex characters) of a request.
 * @example
 * httpFingerprint({ method: 'POST', path: '/orders', query: '', contentType: 'application/json', body: raw });
 */
export function httpFingerprint(parts: FingerprintParts): string {
  const media = parts.contentType?.split(';')[0]?.trim().toLowerCase() ?? '';
  const headers =
    parts.headers === undefined
      ? []
      : Object.entries(parts.headers)
          .filter((entry): entry is [string, string] => entry[1] !== undefined)
          .map(([name, value]) => [name.toLowerCase(), value] as const)
          .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const method = parts.method.toUpperCase();
  const query = canonicalQuery(parts.query);
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
    encoder.string(media);
    encoder.value(bodyPart(parts.body, parts.contentType), 1);
    encoder.text += ']';
    return encoder.digest();
  } catch {
    // A value the canonical encoder refuses (nested too deeply, a function…): fall back to its JSON text,
    // or to a constant marker, so the result is still deterministic for the same input.
    let text: string;
    try {
      text = JSON.stringify(parts.body) ?? 'undefined';
    } catch {
      text = '<unserialisable body>';
    }
    return createFingerprint([
      FINGERPRINT_VERSION,
      method,
      parts.path,
      query,
      headers,
      media,
      { text },
    ]);
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

  string(value: string): void {
    this.text += `s${Buffer.byteLength(value, 'utf8')}:${value}`;
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
        this.text += Number.isFinite(value) ? `d${JSON.stringify(value)};` : 'n';
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
    const entries = Object.entries(value).filter(
      ([, v]) => v !== undefined && typeof v !== 'function' && typeof v !== 'symbol',
    );
    if (entries.length > 1) entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    this.text += `{${entries.length}:`;
    for (const [k, v] of entries) {
      this.string(k);
      this.value(v, depth + 1);
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
