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
  // UTF-16 keeps every code unit as it is, a lone surrogate too; big-endian puts each unit's high byte
  // first, as its hex is read. Native all the way: a string building loop took ~0.4 µs a code unit, and a
  // client chooses how many (a JSON body of `"\uD800"` escapes).
  return Buffer.from(value, 'utf16le').swap16().toString('hex');
}

/**
 * The bytes of `value` in generalised UTF-8 (WTF-8): UTF-8 for a well-formed string (the same bytes as
 * `Buffer.from(value, 'utf8')`), and a lone surrogate as the three bytes its code point would take
 * (`\uD800`: ED A0 80), which no valid UTF-8 holds, instead of U+FFFD's EF BF BD.
 *
 * Linear in the length and one allocation, whatever a client sends: a body of nothing but lone surrogates
 * (a UTF-16 body a parser kept as it is) must not cost more than an ordinary one.
 */
export function generalisedUtf8(value: string): Buffer {
  // Node writes each lone surrogate as U+FFFD, three bytes, the length of its WTF-8 form: the buffer is
  // already the right size with everything else in place, and only those three bytes change.
  const bytes = Buffer.from(value, 'utf8');
  if (isWellFormed(value)) return bytes;
  let offset = 0; // where code unit `i` starts in `bytes`
  for (let i = 0; i < value.length; i++) {
    const unit = value.charCodeAt(i);
    if (unit < 0x80) offset += 1;
    else if (unit < 0x800) offset += 2;
    else if (unit < 0xd800 || unit > 0xdfff) offset += 3;
    else {
      const next = value.charCodeAt(i + 1); // NaN past the end: no pair
      if (unit <= 0xdbff && next >= 0xdc00 && next <= 0xdfff) {
        i++; // a pair: one character, four bytes, as UTF-8 writes it
        offset += 4;
      } else {
        bytes[offset] = 0xe0 | (unit >> 12);
        bytes[offset + 1] = 0x80 | ((unit >> 6) & 0x3f);
        bytes[offset + 2] = 0x80 | (unit & 0x3f);
        offset += 3;
      }
    }
  }
  return bytes;
}
