/**
 * Turning rows of the records table into the core's record union. node-postgres returns `bigint` columns as
 * strings (they may exceed 2^53); tokens are kept below 2^53 by the sequence's MAXVALUE, so they convert
 * exactly.
 * @module
 */
import type { ClaimResult, IdempotencyRecord } from '../core/record.js';
import { RecordStatus } from '../core/record.js';

/** A record row as `claim.sql` and `get.sql` return it. */
export interface RecordRow {
  /** Only in claim results. */
  claimed?: boolean;
  status: string;
  fingerprint: string;
  token: string | number;
  attempt: number;
  outcome: Uint8Array | null;
  created_at_ms: number;
  completed_at_ms: number | null;
  expires_at_ms: number;
}

/**
 * A `bigint` column (string or number) as a safe integer.
 * @throws Error when the value is not a safe integer (a corrupted row).
 */
export function toSafeInteger(value: string | number | bigint, column: string): number {
  const number = Number(value);
  if (!Number.isSafeInteger(number)) throw new Error(`${column} is not a safe integer: ${value}`);
  return number;
}

/** The core record a row stands for. */
export function rowToRecord(row: RecordRow): IdempotencyRecord {
  const token = toSafeInteger(row.token, 'token');
  if (row.status === RecordStatus.Completed) {
    if (row.outcome === null || row.completed_at_ms === null) {
      throw new Error('completed row without outcome or completed_at');
    }
    return {
      status: RecordStatus.Completed,
      fingerprint: row.fingerprint,
      token,
      outcome: row.outcome,
      completedAt: row.completed_at_ms,
      expiresAt: row.expires_at_ms,
    };
  }
  return {
    status: RecordStatus.InProgress,
    fingerprint: row.fingerprint,
    token,
    leaseUntil: row.expires_at_ms,
    attempt: row.attempt,
    createdAt: row.created_at_ms,
  };
}

/** The claim result a `claim.sql` row stands for. */
export function rowToClaimResult(row: RecordRow): ClaimResult {
  if (row.claimed === true) {
    return {
      claimed: true,
      token: toSafeInteger(row.token, 'token'),
      attempt: row.attempt,
      leaseUntil: row.expires_at_ms,
    };
  }
  return { claimed: false, record: rowToRecord(row) };
}
