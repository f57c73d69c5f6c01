/**
 * What a string request body under a JSON type is: the JSON text itself (`express.text()` for a JSON
 * type, a parser that hands the text on), or a JSON string value a parser made of a body such as `"123"`
 * (Fastify's JSON parser, `express.json({ strict: false })`). Read as JSON text, the value `"123"` would
 * fingerprint as the number `123`, and `"{\"a\":1}"` as the object `{"a":1}`: a key reused for the other
 * body would be replayed the first one's answer. Its length tells them apart: the text is the whole body,
 * whereas a string value's JSON text is at least its two quotes longer (escapes only lengthen it).
 * @module
 */
import { charsetOf } from './charset.js';

/** A request header reader, as the middleware's facts and the transactional requests have one. */
type HeaderReader = (name: string) => string | readonly string[] | null | undefined;

/**
 * `undefined` for a body that is not a string; `'text'` when `body` is the whole body as received: a
 * UTF-8 body whose `Content-Length` (with no `Content-Encoding`, after which the parser read other bytes)
 * is the string's UTF-8 length; else
 * `'value'`, a string a parser produced, also when the length is unknown (a chunked body) or the text was
 * decoded from another charset: read as a string, it still fingerprints alike on every retry.
 * @example
 * stringBodyKind('"123"'.slice(1, -1), (name) => ({ 'content-length': '5' })[name]); // 'value'
 */
export function stringBodyKind(body: unknown, header: HeaderReader): 'text' | 'value' | undefined {
  // Only a string body needs it (`FingerprintParts.stringBody`): the header reads spared otherwise.
  if (typeof body !== 'string') return undefined;
  const encoding = header('content-encoding');
  if (encoding !== undefined && encoding !== null && encoding !== '' && encoding !== 'identity') {
    return 'value';
  }
  const type = header('content-type');
  if (charsetOf(typeof type === 'string' ? type : type?.[0]) !== '') return 'value';
  const length = header('content-length');
  if (typeof length !== 'string' || !/^\s*\d{1,15}\s*$/.test(length)) return 'value';
  return Number(length) === Buffer.byteLength(body, 'utf8') ? 'text' : 'value';
}
