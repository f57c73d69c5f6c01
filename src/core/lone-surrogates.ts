/**
 * Strings with a lone surrogate (half of a character such as an emoji, from a JSON `"\uD800"` escape, a
 * string cut by length, or text decoded as UTF-16), written so that they stay apart from every other
 * string. UTF-8 has no form for a lone surrogate: `Buffer.from`, `Buffer.byteLength`, `hash()` and
 * `TextEncoder` all write U+FFFD in its place, so `"\uD800"`, `"\uDC00"` and `"\uFFFD"` become the same
 * bytes, and two requests that differ only there would fingerprint alike (a key reused for the other one
 * replayed, not refused). A well-formed string, every ordinary one, is written as it always was.
 * @module
 */

// `String.prototype.isWellFormed` (ES2024, Node 20): O(1) for a one-byte string, a native scan otherwise;
// several times faster than `/\p{Cs}/u` on two-byte text. Typed here, as the project's lib is ES2023.
const isWellFormedNative = String.prototype as unknown as { isWellFormed(this: string): boolean };

/** Whether every UTF-16 code unit of `value` is part of a character: no lone surrogate. */
export function isWellFormed(value: string): boolean {
  return isWellFormedNative.isWellFormed.call(value);
}

/**
 * The UTF-16 code units of `value`, four lower-case hex digits each: the fingerprint's form of a string
 * that is not well formed (one code unit per 4 characters, so it needs no other length than the count).
 */
export function codeUnitsHex(value: string): string {
  let hex = '';
  for (let i = 0; i < value.length; i++) hex += value.charCodeAt(i).toString(16).padStart(4, '0');
  return hex;
}

/**
 * The bytes of `value` in generalised UTF-8 (WTF-8): UTF-8 for a well-formed string (the same bytes as
 * `Buffer.from(value, 'utf8')`), and a lone surrogate as the three bytes its code point would take
 * (`\uD800`: ED A0 80), which no valid UTF-8 holds, instead of U+FFFD's EF BF BD.
 */
export function generalisedUtf8(value: string): Buffer {
  if (isWellFormed(value)) return Buffer.from(value, 'utf8');
  const chunks: Buffer[] = [];
  let start = 0;
  for (let i = 0; i < value.length; i++) {
    const unit = value.charCodeAt(i);
    if (unit < 0xd800 || unit > 0xdfff) continue;
    const next = value.charCodeAt(i + 1);
    if (unit <= 0xdbff && next >= 0xdc00 && next <= 0xdfff) {
      i++; // a pair: UTF-8 writes it as it is
      continue;
    }
    chunks.push(
      Buffer.from(value.slice(start, i), 'utf8'),
      Buffer.from([0xe0 | (unit >> 12), 0x80 | ((unit >> 6) & 0x3f), 0x80 | (unit & 0x3f)]),
    );
    start = i + 1;
  }
  chunks.push(Buffer.from(value.slice(start), 'utf8'));
  return Buffer.concat(chunks);
}
