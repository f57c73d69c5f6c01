/**
 * What keeps a JavaScript string from being stored as text as it is: a NUL character (PostgreSQL `text`
 * and `jsonb` refuse it, SQLSTATE 22021) or a lone surrogate (half of a character such as an emoji, often
 * from cutting a string by length), which has no UTF-8 form (the driver sends U+FFFD instead, so the stored
 * value no longer equals the one given). The outbox refuses such fields; the stores keep such a fingerprint
 * as a digest (`./stored-fingerprint.ts`, and the PostgreSQL store's own for a NUL too).
 * @module
 */

import { isWellFormed } from './lone-surrogates.js';

// biome-ignore lint/suspicious/noControlCharactersInRegex: matching this character is the point.
const NUL = /\u0000/;

/** Why `value` cannot be stored as text as it is, or `undefined` when it can. */
export function textFlaw(value: string): 'nul' | 'lone-surrogate' | undefined {
  if (NUL.test(value)) return 'nul';
  // `isWellFormed` is false exactly for a lone surrogate (as `/\p{Cs}/u` matches), 1.1–11× faster.
  if (!isWellFormed(value)) return 'lone-surrogate';
  return undefined;
}

/**
 * Whether `value` holds a lone surrogate, NUL or not (what {@link textFlaw} reports first is the NUL): the
 * one flaw that UTF-8 text (SQLite, Redis) cannot keep, where a NUL is kept as it is.
 */
export function hasLoneSurrogate(value: string): boolean {
  return !isWellFormed(value);
}
