/**
 * The default scope of a request: a digest of its credentials, so that a stored response is only ever
 * replayed to the caller that produced it. Requests with no credentials share the empty scope.
 * @module
 */
import { createHash } from 'node:crypto';

/**
 * A digest of the `Authorization` and `Cookie` header values; `''` when the request carries neither.
 * Only the digest is used (inside the hashed storage key); credentials are never stored.
 */
export function credentialScope(
  authorization: string | undefined | null,
  cookie: string | undefined | null,
): string {
  if (!authorization && !cookie) return '';
  return createHash('sha256')
    .update(JSON.stringify([authorization ?? '', cookie ?? '']))
    .digest('base64url');
}
