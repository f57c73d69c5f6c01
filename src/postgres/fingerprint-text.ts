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
import { createHash } from 'node:crypto';
import type { ClaimResult } from '../core/record.js';
import { textFlaw } from '../core/text-flaw.js';

// Never the output of createFingerprint (hex); named so an operator reading the row knows what it is.
const STORED_PREFIX = 'ik-fp:sha256:';

/** The fingerprint as the records table holds it: itself, or a digest when text cannot hold it. */
export function storedFingerprint(fingerprint: string): string {
  if (textFlaw(fingerprint) === undefined) return fingerprint;
  return STORED_PREFIX + createHash('sha256').update(fingerprint, 'utf16le').digest('hex');
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
