/**
 * Checks of what a store answers to a claim or a completion, before the engine acts on it. A custom store
 * (or a batch call's single item) may break the contract: an `undefined`, a string, a record missing a
 * field. Read as is, such an answer threw a raw `TypeError` out of `run()`, or worse, ran the handler with
 * no token (`{ claimed: true }` alone). The engine must never run the handler on a claim state it cannot
 * read, so a malformed answer fails that call alone with a `StoreUnavailableError` (HTTP answers 503, a
 * consumer retries the delivery later), as a store that could not be reached would, and never fails open:
 * the store did answer, and its answer may well mean that the key is held.
 *
 * The checks cost a few `typeof`s on the common path, and no allocation unless an answer is malformed.
 * @module
 */
import { StoreUnavailableError } from './errors.js';
import { type ClaimResult, type IdempotencyRecord, RecordStatus } from './record.js';

/** True when `record` has every field the engine reads on a record that blocks a claim. */
function isBlockingRecord(record: unknown): record is IdempotencyRecord {
  if (typeof record !== 'object' || record === null) return false;
  const r = record as Partial<Record<string, unknown>>;
  if (typeof r.fingerprint !== 'string') return false;
  if (r.status === RecordStatus.InProgress) return typeof r.leaseUntil === 'number';
  return (
    r.status === RecordStatus.Completed &&
    r.outcome instanceof Uint8Array &&
    typeof r.expiresAt === 'number'
  );
}

/**
 * True when `claim` is a {@link ClaimResult} the engine can act on: held with a numeric token and attempt,
 * or blocked by a readable record.
 */
export function isClaimResult(claim: unknown): claim is ClaimResult {
  if (typeof claim !== 'object' || claim === null) return false;
  const c = claim as Partial<Record<string, unknown>>;
  if (c.claimed === true) return typeof c.token === 'number' && typeof c.attempt === 'number';
  return c.claimed === false && isBlockingRecord(c.record);
}

/** A short description of a malformed answer for the error message (never the whole value: it may be big). */
function describeAnswer(answer: unknown): string {
  if (answer === null || typeof answer !== 'object') return String(answer);
  try {
    const text = JSON.stringify(answer, (_key, value: unknown) =>
      value instanceof Uint8Array ? `<${value.length} bytes>` : value,
    );
    return text.length > 200 ? `${text.slice(0, 200)}…` : text;
  } catch {
    return Object.prototype.toString.call(answer);
  }
}

/**
 * The error for a store's answer to `operation` that breaks the contract: nothing was executed on the
 * strength of it. Its `cause` is a `TypeError` naming the answer, for logs.
 */
export function malformedAnswerError(
  storeName: string,
  operation: 'claim' | 'complete' | 'extend',
  answer: unknown,
): StoreUnavailableError {
  const expected = operation === 'claim' ? 'a ClaimResult' : 'a boolean';
  return new StoreUnavailableError(
    `Store '${storeName}' answered ${operation} with a malformed result (expected ${expected}); ` +
      'the store breaks its contract (the `Store` interface), so nothing was run',
    { cause: new TypeError(`${operation} returned ${describeAnswer(answer)}`) },
  );
}
