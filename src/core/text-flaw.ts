/**
 * What keeps a JavaScript string from being stored as text as it is: a NUL character (PostgreSQL `text`
 * and `jsonb` refuse it, SQLSTATE 22021) or a lone surrogate (half of a character such as an emoji, often
 * from cutting a string by length), which has no UTF-8 form (the driver sends U+FFFD instead, so the stored
 * value no longer equals the one given). The outbox refuses such fields; the PostgreSQL store keeps such a
 * fingerprint as a digest.
 * @module
 */

// biome-ignore lint/suspicious/noControlCharactersInRegex: matching this character is the point.
const NUL = /\u0000/;
// With the `u` flag a valid pair is one code point, so only a lone half matches.
const LONE_SURROGATE = /\p{Cs}/u;

/** Why `value` cannot be stored as text as it is, or `undefined` when it can. */
export function textFlaw(value: string): 'nul' | 'lone-surrogate' | undefined {
  if (NUL.test(value)) return 'nul';
  if (LONE_SURROGATE.test(value)) return 'lone-surrogate';
  return undefined;
}
