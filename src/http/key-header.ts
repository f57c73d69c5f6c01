/**
 * The `Idempotency-Key` request header: an RFC 9651 Item whose value is an sf-string (`"…"`), or, for
 * Stripe-style clients, a bare token. Parameters after the item are allowed and ignored, as RFC 9651 asks.
 *
 * Parsing is strict about everything else: two header lines, a list, trailing garbage, control characters
 * and non-ASCII characters are refused (they would otherwise be silently joined or trimmed into a
 * different key than the client meant).
 * @module
 */
import { InvalidKeyError } from '../core/errors.js';
import { validateKey } from '../core/key.js';

/** The key header as it was found on a request. */
export type KeyHeaderResult = { present: false } | { present: true; key: string };

// A bare token: visible ASCII except the characters that delimit Structured Fields (quote, comma,
// semicolon, backslash) and whitespace. Wider than an RFC 9651 token on purpose: Stripe-style keys are
// UUIDs, which may start with a digit.
const BARE_TOKEN = /^[\x21\x23-\x2b\x2d-\x3a\x3c-\x5b\x5d-\x7e]+$/;
// RFC 9651 §3.1.2 parameters: `;key` or `;key=value`, where value is a bare item (loosely checked).
const PARAMETERS =
  /^(?:[ ]*;[ ]*[a-z*][a-z0-9_.*-]*(?:=(?:"(?:[\x20\x21\x23-\x5b\x5d-\x7e]|\\["\\])*"|[\x21\x23-\x2b\x2d-\x3a\x3c-\x7e]+))?)*$/;

/**
 * Read the key from the header's value(s). `values` is what the framework gives: one string, one string
 * per header line, or nothing.
 * @throws InvalidKeyError when the header is present but not one valid key (empty, malformed, over 255
 *   characters, non-printable or non-ASCII characters, several values).
 */
export function parseKeyHeader(
  values: string | readonly string[] | null | undefined,
): KeyHeaderResult {
  if (values === undefined || values === null) return { present: false };
  if (typeof values !== 'string') {
    if (values.length === 0) return { present: false };
    if (values.length > 1)
      throw new InvalidKeyError('the header must be sent once, with one value');
    return { present: true, key: parseKeyValue(values[0] ?? '') };
  }
  return { present: true, key: parseKeyValue(values) };
}

/**
 * Parse one header field value into a key.
 * @throws InvalidKeyError when it is not exactly one valid key.
 */
export function parseKeyValue(raw: string): string {
  // RFC 9651 §4.2: leading and trailing spaces are discarded (HTTP also strips tabs around a value).
  const value = isPadded(raw) ? trimSpaces(raw) : raw;
  if (value.length === 0) throw new InvalidKeyError('must not be empty');
  let key: string;
  let rest: string;
  if (value.startsWith('"')) {
    ({ key, rest } = parseSfString(value));
  } else {
    const end = value.search(/[ \t;,"]/);
    key = end === -1 ? value : value.slice(0, end);
    rest = end === -1 ? '' : value.slice(end);
    if (key.length === 0 || !BARE_TOKEN.test(key)) {
      throw new InvalidKeyError(
        'must be a quoted string ("…") or a token of printable ASCII characters without spaces',
      );
    }
  }
  if (rest.length > 0 && !PARAMETERS.test(rest)) {
    throw new InvalidKeyError(
      rest.trimStart().startsWith(',')
        ? 'the header must carry exactly one key, not a list'
        : 'unexpected characters after the key',
    );
  }
  validateKey(key);
  return key;
}

// A space or tab at either end (the common key has none, and skips the replace).
function isPadded(raw: string): boolean {
  const first = raw.charCodeAt(0);
  const last = raw.charCodeAt(raw.length - 1);
  return first === 0x20 || first === 0x09 || last === 0x20 || last === 0x09;
}

// `raw` without the spaces and tabs at either end. Not `replace(/^[ \t]+|[ \t]+$/g, '')`: its second
// branch is tried from every position of a run of spaces inside the value, which makes a value such as
// ` a`, 50,000 spaces, `x` cost over a second.
function trimSpaces(raw: string): string {
  let start = 0;
  let end = raw.length;
  while (start < end && isSpaceOrTab(raw.charCodeAt(start))) start++;
  while (end > start && isSpaceOrTab(raw.charCodeAt(end - 1))) end--;
  return raw.slice(start, end);
}

const isSpaceOrTab = (code: number): boolean => code === 0x20 || code === 0x09;

// RFC 9651 §4.2.5: DQUOTE *( unescaped / "\" ( DQUOTE / "\" ) ) DQUOTE, over printable ASCII only.
function parseSfString(value: string): { key: string; rest: string } {
  let out = '';
  for (let i = 1; i < value.length; i++) {
    const c = value.charCodeAt(i);
    if (c === 0x5c) {
      const next = value[i + 1];
      if (next !== '"' && next !== '\\') {
        throw new InvalidKeyError('a backslash in a quoted key may only escape " or \\');
      }
      out += next;
      i++;
    } else if (c === 0x22) {
      if (out.length === 0) throw new InvalidKeyError('must not be empty');
      return { key: out, rest: value.slice(i + 1) };
    } else if (c < 0x20 || c > 0x7e) {
      throw new InvalidKeyError('must contain only printable ASCII characters (0x20-0x7E)');
    } else {
      out += value[i];
    }
  }
  throw new InvalidKeyError('the quoted key has no closing quote');
}
