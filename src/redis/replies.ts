/**
 * Decoding of the scripts' replies into the core's record types. Bulk strings arrive as `Buffer`s (see
 * `client.ts`); numbers stored in hash fields come back as decimal text, script-computed ones as integers.
 * @module
 */
import { type ClaimResult, type IdempotencyRecord, RecordStatus } from '../core/record.js';

/** A reply element as text (UTF-8), whatever type the client decoded it to. */
export function replyText(value: unknown): string {
  if (Buffer.isBuffer(value)) return value.toString('utf8');
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'bigint') return String(value);
  throw new Error(`unexpected Redis reply element: ${typeof value}`);
}

/** A reply element as a safe integer. */
export function replyNumber(value: unknown): number {
  const number = typeof value === 'number' ? value : Number(replyText(value));
  if (!Number.isSafeInteger(number)) throw new Error(`unexpected Redis number: ${String(value)}`);
  return number;
}

/** A reply element as bytes, copied out of the client's read buffer. */
function replyBytes(value: unknown): Uint8Array {
  if (Buffer.isBuffer(value)) return new Uint8Array(value);
  if (typeof value === 'string') return new Uint8Array(Buffer.from(value, 'utf8'));
  throw new Error(`unexpected Redis reply for an outcome: ${typeof value}`);
}

function asArray(reply: unknown): unknown[] {
  if (!Array.isArray(reply)) throw new Error(`unexpected Redis reply: ${typeof reply}`);
  return reply;
}

/**
 * Decode `{0, status, …fields}` (claim's "not claimed" branch and get's reply) into a record.
 * `offset` is the index of the status element.
 */
function decodeRecord(reply: unknown[], offset: number): IdempotencyRecord {
  const status = replyText(reply[offset]);
  const fingerprint = replyText(reply[offset + 1]);
  const token = replyNumber(reply[offset + 2]);
  if (status === RecordStatus.InProgress) {
    return {
      status: RecordStatus.InProgress,
      fingerprint,
      token,
      leaseUntil: replyNumber(reply[offset + 3]),
      attempt: replyNumber(reply[offset + 4]),
      createdAt: replyNumber(reply[offset + 5]),
    };
  }
  if (status === RecordStatus.Completed) {
    return {
      status: RecordStatus.Completed,
      fingerprint,
      token,
      outcome: replyBytes(reply[offset + 3]),
      completedAt: replyNumber(reply[offset + 4]),
      expiresAt: replyNumber(reply[offset + 5]),
    };
  }
  throw new Error(`unexpected record status in Redis reply: ${status}`);
}

/** Decode claim-2.lua's reply. */
export function decodeClaim(reply: unknown): ClaimResult {
  const items = asArray(reply);
  if (replyNumber(items[0]) === 1) {
    return {
      claimed: true,
      token: replyNumber(items[1]),
      attempt: replyNumber(items[2]),
      leaseUntil: replyNumber(items[3]),
    };
  }
  return { claimed: false, record: decodeRecord(items, 1) };
}

/** Decode get-1.lua's reply. */
export function decodeGet(reply: unknown): IdempotencyRecord | undefined {
  const items = asArray(reply);
  return items.length === 0 ? undefined : decodeRecord(items, 1);
}

/** Decode a compare-and-set script's `1` / `0`. */
export function decodeFlag(reply: unknown): boolean {
  return replyNumber(reply) === 1;
}
