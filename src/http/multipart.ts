/**
 * Multipart bodies as the fingerprint sees them. A client that sends the same form twice (a browser's
 * `fetch` of a `FormData`, undici, curl `-F`) picks a new random boundary each time, so the bytes of a retry
 * differ from the first request's though the form is the same: compared as raw bytes, every retry of an
 * upload would be a 422. The fingerprint therefore reads the parts (RFC 2046 §5.1.1, RFC 7578) and covers
 * each part's headers and content, in order, without the boundary, the preamble or the epilogue.
 * @module
 */
import { bufferView } from '../core/bytes.js';

/**
 * One part of a multipart body: its headers as `[lower-case name, trimmed value]` pairs sorted by name
 * (a stable sort: repeated headers keep their order), and its content bytes (a view, not a copy).
 */
export type MultipartPart = [headers: Array<[string, string]>, content: Uint8Array];

const CRLF = Buffer.from('\r\n');
const HEADERS_END = Buffer.from('\r\n\r\n');
const DASH = 0x2d;
const CR = 0x0d;
const LF = 0x0a;

/**
 * The `boundary` parameter of a multipart content type (quoted or not), or `undefined` when there is none
 * or it is not a valid boundary (1–70 characters, RFC 2046).
 */
export function multipartBoundary(contentType: string): string | undefined {
  for (const parameter of contentType.split(';').slice(1)) {
    const equals = parameter.indexOf('=');
    if (equals === -1 || parameter.slice(0, equals).trim().toLowerCase() !== 'boundary') continue;
    let value = parameter.slice(equals + 1).trim();
    if (value.length >= 2 && value.startsWith('"') && value.endsWith('"')) {
      value = value.slice(1, -1).replace(/\\(.)/g, '$1');
    }
    return value.length >= 1 && value.length <= 70 ? value : undefined;
  }
  return undefined;
}

/**
 * The parts of a multipart body, or `undefined` when the bytes are not a well-formed multipart body with
 * that boundary (no delimiter, no closing delimiter, a part without its header block): the fingerprint then
 * compares the raw bytes, as for any other body. Never throws.
 * @example
 * // --x\r\nContent-Disposition: form-data; name="a"\r\n\r\n1\r\n--x--
 * multipartParts(bytes, 'multipart/form-data; boundary=x');
 * // [[[['content-disposition', 'form-data; name="a"']], <the byte '1'>]]
 */
export function multipartParts(body: Uint8Array, contentType: string): MultipartPart[] | undefined {
  const boundary = multipartBoundary(contentType);
  if (boundary === undefined) return undefined;
  const bytes = bufferView(body);
  const dashBoundary = Buffer.from(`--${boundary}`, 'latin1');
  const delimiter = Buffer.concat([CRLF, dashBoundary]);
  // The first delimiter opens the body or follows the preamble's last line break.
  let at = bytes.indexOf(dashBoundary);
  while (at > 0 && !(bytes[at - 2] === CR && bytes[at - 1] === LF)) {
    at = bytes.indexOf(dashBoundary, at + 1);
  }
  if (at === -1) return undefined;
  const parts: MultipartPart[] = [];
  for (;;) {
    let next = at + dashBoundary.length;
    // The closing delimiter: what follows it is the epilogue, which carries no meaning.
    if (bytes[next] === DASH && bytes[next + 1] === DASH) return parts;
    // Transport padding (linear white space) may follow a delimiter, then its line break.
    while (bytes[next] === 0x20 || bytes[next] === 0x09) next++;
    if (bytes[next] !== CR || bytes[next + 1] !== LF) return undefined;
    const start = next + 2;
    const end = bytes.indexOf(delimiter, start);
    if (end === -1) return undefined;
    const part = parsePart(bytes.subarray(start, end));
    if (part === undefined) return undefined;
    parts.push(part);
    at = end + CRLF.length;
  }
}

function parsePart(part: Buffer): MultipartPart | undefined {
  // No header block at all: the part opens with the blank line.
  if (part[0] === CR && part[1] === LF) return [[], part.subarray(2)];
  const headersEnd = part.indexOf(HEADERS_END);
  if (headersEnd === -1) return undefined;
  const headers: Array<[string, string]> = [];
  for (const line of part.subarray(0, headersEnd).toString('latin1').split('\r\n')) {
    const colon = line.indexOf(':');
    // A line without a name (or an obsolete folded one): not a header block this reader trusts.
    if (colon <= 0 || line[0] === ' ' || line[0] === '\t') return undefined;
    headers.push([line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim()]);
  }
  headers.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return [headers, part.subarray(headersEnd + HEADERS_END.length)];
}
