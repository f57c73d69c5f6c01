/**
 * The request fingerprint: SHA-256 over the method, the path, the canonical query, selected headers and the
 * body. JSON bodies are canonicalised (object key order never matters); other bodies are compared as raw
 * bytes. The function is total: any input gives a fingerprint, never an exception, so hostile bodies can
 * only ever produce a 422 (mismatch), never a 500.
 * @module
 */
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
        return { json: JSON.parse(Buffer.from(bytes).toString('utf8')) as unknown };
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
  const headers = Object.entries(parts.headers ?? {})
    .filter((entry): entry is [string, string] => entry[1] !== undefined)
    .map(([name, value]) => [name.toLowerCase(), value] as const)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const base = [
    FINGERPRINT_VERSION,
    parts.method.toUpperCase(),
    parts.path,
    canonicalQuery(parts.query),
    headers,
    media,
  ];
  try {
    return createFingerprint([...base, bodyPart(parts.body, parts.contentType)]);
  } catch {
    // A value the canonical encoder refuses (nested too deeply, a function…): fall back to its JSON text,
    // or to a constant marker, so the result is still deterministic for the same input.
    let text: string;
    try {
      text = JSON.stringify(parts.body) ?? 'undefined';
    } catch {
      text = '<unserialisable body>';
    }
    return createFingerprint([...base, { text }]);
  }
}
