/**
 * Fingerprints that a PostgreSQL `text` column cannot hold as they are. A fingerprint is any string the
 * caller chose (`RunRequest.fingerprint`): one with a NUL character (a digest kept as a `'binary'` or
 * `'latin1'` string has one in about one request in eight) made every claim fail with SQLSTATE 22021, an
 * outage on every retry, and with `failOpen` an unprotected execution each time, where the other stores
 * keep it. One with an unpaired surrogate is sent as U+FFFD, so the stored fingerprint no longer equals
 * the request's, and the same request's retry was a mismatch.
 *
 * Such a fingerprint is stored as a digest of its UTF-16 code units instead, and a record the claim returns
 * with that digest is given the request's own fingerprint back, so that the engine compares like with like.
 * Every other fingerprint is stored as is, as before. `get`, `inspect` and `listCrashed` show the stored
 * form.
 * @module
 */
import type { ClaimResult } from '../core/record.js';
import { fingerprintDigest } from '../core/stored-fingerprint.js';
import { textFlaw } from '../core/text-flaw.js';

/**
 * The fingerprint as the records table holds it: itself, or the digest the other stores use too
 * (`../core/stored-fingerprint.ts`) when text cannot hold it (here a NUL as well as a lone surrogate).
 */
export function storedFingerprint(fingerprint: string): string {
  return textFlaw(fingerprint) === undefined ? fingerprint : fingerprintDigest(fingerprint);
}

/**
 * `result` with the request's own fingerprint on the record that blocks it, when that record holds the
 * stored form of it (the same request); otherwise `result` as it is (another request: a mismatch).
 */
export function withRequestFingerprint(result: ClaimResult, fingerprint: string): ClaimResult {
  if (result.claimed || result.record.fingerprint === fingerprint) return result;
  const stored = storedFingerprint(fingerprint);
  if (stored === fingerprint || result.record.fingerprint !== stored) return result;
  return { claimed: false, record: { ...result.record, fingerprint } };
}
