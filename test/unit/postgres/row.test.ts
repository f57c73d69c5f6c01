import { describe, expect, it } from 'vitest';
import { isStoreUnavailableError } from '../../../src/index.js';
import {
  isRetryableTransactionError,
  sqlState,
  toStoreError,
} from '../../../src/postgres/client.js';
import { rowToClaimResult, rowToRecord, toSafeInteger } from '../../../src/postgres/row.js';

const base = {
  fingerprint: 'fp',
  token: '9007199254740991',
  attempt: 2,
  outcome: null,
  created_at_ms: 1000,
  completed_at_ms: null,
  expires_at_ms: 5000,
};

describe('rowToRecord', () => {
  it('maps an in-progress row, converting the bigint token string to a number', () => {
    // Act
    const record = rowToRecord({ ...base, status: 'in_progress' });
    // Assert
    expect(record).toEqual({
      status: 'in_progress',
      fingerprint: 'fp',
      token: Number.MAX_SAFE_INTEGER,
      leaseUntil: 5000,
      attempt: 2,
      createdAt: 1000,
    });
  });

  it('maps a completed row with its outcome bytes', () => {
    // Arrange
    const outcome = Buffer.from([0, 1, 255]);
    // Act
    const record = rowToRecord({
      ...base,
      token: 7,
      status: 'completed',
      outcome,
      completed_at_ms: 2000,
    });
    // Assert
    expect(record).toEqual({
      status: 'completed',
      fingerprint: 'fp',
      token: 7,
      outcome,
      completedAt: 2000,
      expiresAt: 5000,
    });
  });

  it('refuses a token beyond the safe integer range', () => {
    // Act / Assert
    expect(() => toSafeInteger('9007199254740993', 'token')).toThrow(/safe integer/);
  });

  it('turns a claimed row into a claim result with the new lease', () => {
    // Act
    const result = rowToClaimResult({ ...base, token: '12', status: 'in_progress', claimed: true });
    // Assert
    expect(result).toEqual({ claimed: true, token: 12, attempt: 2, leaseUntil: 5000 });
  });
});

describe('driver errors', () => {
  it('recognises serialization failures and deadlocks as retryable', () => {
    // Act / Assert
    expect(isRetryableTransactionError({ code: '40001' })).toBe(true);
    expect(isRetryableTransactionError({ code: '40P01' })).toBe(true);
    expect(isRetryableTransactionError({ code: '23505' })).toBe(false);
    expect(sqlState({ code: 'ECONNREFUSED' })).toBeUndefined();
  });

  it('wraps a driver error as StoreUnavailableError with the cause and a migrate hint', () => {
    // Arrange
    const cause = Object.assign(new Error('relation "x" does not exist'), { code: '42P01' });
    // Act
    const error = toStoreError('claim', cause);
    // Assert
    expect(isStoreUnavailableError(error)).toBe(true);
    expect(error.cause).toBe(cause);
    expect(error.message).toMatch(/claim.*does not exist.*migrate/);
  });
});
