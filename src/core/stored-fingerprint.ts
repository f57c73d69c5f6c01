/**
 * Fingerprints that a store keeping text as UTF-8 (SQLite through better-sqlite3, Redis through its
 * clients) cannot hold as they are. A fingerprint is any string the caller chose (`RunRequest.fingerprint`,
 * a consumer's `fingerprint(message)`): one with an unpaired surrogate (half of a character such as an
 * emoji, from a string cut by length, or a JSON `"\uD800"` escape) has no UTF-8 form, and the driver sends
 * U+FFFD in its place. The stored fingerprint then no longer equals the request's, so the same request's
 * retry was refused as a mismatch (422) instead of replayed; and every lone surrogate turned into the same
 * U+FFFD, so a request that differed only there was replayed another request's outcome, or resumed its
 * recorded steps.
 *
 * Such a fingerprint is stored as a digest of its UTF-16 code units instead (the PostgreSQL store's form:
 * `src/postgres/fingerprint-text.ts`), and a record that a claim returns with that digest is given the
 * request's own fingerprint back, so that the engine compares like with like. Every other fingerprint, a
 * NUL included (both stores keep it), is stored as is, as before: records written by earlier releases keep
 * matching their retries. `get`, `inspect` and `listCrashed` show the stored form.
 * @module
 */
import { createHash } from 'node:crypto';
import { hasLoneSurrogate } from './text-flaw.js';

// Never the output of createFingerprint (hex); named so an operator reading the record knows what it is.
const DIGEST_PREFIX = 'ik-fp:sha256:';

/** `ik-fp:sha256:` and the hex SHA-256 of `fingerprint`'s UTF-16 code units: every string has one. */
export function fingerprintDigest(fingerprint: string): string {
  return DIGEST_PREFIX + createHash('sha256').update(fingerprint, 'utf16le').digest('hex');
}

/** The fingerprint as a UTF-8 store (SQLite, Redis) keeps it: itself, or its digest when UTF-8 cannot. */
export function utf8StoredFingerprint(fingerprint: string): string {
  return hasLoneSurrogate(fingerprint) ? fingerprintDigest(fingerprint) : fingerprint;
}

/**
 * The fingerprint of a record found blocking a claim with `fingerprint`, to compare with it: the
 * request's own when `stored` is its stored form (the same request), otherwise `stored` as it is (another
 * request: a mismatch).
 */
export function comparableFingerprint(stored: string, fingerprint: string): string {
  if (stored === fingerprint || !hasLoneSurrogate(fingerprint)) return stored;
  return stored === fingerprintDigest(fingerprint) ? fingerprint : stored;
}
