/**
 * What keeps a JavaScript string from being stored as text as it is: a NUL character (PostgreSQL `text`
 * and `jsonb` refuse it, SQLSTATE 22021) or a lone surrogate (half of a character such as an emoji, often
 * from cutting a string by length), which has no UTF-8 form (the driver sends U+FFFD instead, so the stored
 * value no longer equals the one given). The outbox refuses such fields; the stores keep such a fingerprint
 * as a digest (`./stored-fingerprint.ts`, and the PostgreSQL store's own for a NUL too).
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

/**
 * Whether `value` holds a lone surrogate, NUL or not (what {@link textFlaw} reports first is the NUL): the
 * one flaw that UTF-8 text (SQLite, Redis) cannot keep, where a NUL is kept as it is.
 */
export function hasLoneSurrogate(value: string): boolean {
  return LONE_SURROGATE.test(value);
}
