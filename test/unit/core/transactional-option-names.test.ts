/**
 * The transactional modes check their options as the engine and the stores do: an unknown name is refused
 * (a misspelt `lockTimeout` left every duplicate waiting for the first transaction, a misspelt
 * `retention` kept outcomes 24 h), hooks must be functions, and a wrong value is shown with its type.
 */
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { type PgPool, postgresTransactional } from '../../../src/postgres/index.js';
import { sqliteTransactional } from '../../../src/sqlite/index.js';

// Never called: option checks happen before any statement is sent.
const pool: PgPool = { connect: () => Promise.reject(new Error('no I/O in unit tests')) } as PgPool;
const database = new Database(':memory:');
afterAll(() => database.close());

const refusal = (message: RegExp) =>
  expect.objectContaining({ code: 'invalid_options', message: expect.stringMatching(message) });

const build = {
  postgresTransactional: (extra: Record<string, unknown>) =>
    postgresTransactional({ pool, prepare: false, ...extra }),
  sqliteTransactional: (extra: Record<string, unknown>) =>
    sqliteTransactional({ database, ...extra }),
};

describe.each(Object.keys(build) as (keyof typeof build)[])('%s', (mode) => {
  it('refuses an unknown option, naming the accepted ones', () => {
    // Act / Assert
    expect(() => build[mode]({ retention: '1h' })).toThrow(
      refusal(new RegExp(`^${mode}: unknown field "retention"; the fields are .*retentionMs`)),
    );
  });

  it('refuses hooks that are not functions', () => {
    // Act / Assert
    expect(() => build[mode]({ hooks: { onExecuted: 'log' } })).toThrow(
      refusal(/^hooks\.onExecuted: expected a function, got "log"$/),
    );
  });

  it('still takes its documented options', () => {
    // Act / Assert
    expect(() =>
      build[mode]({ namespace: 'billing', retentionMs: '1h', hooks: { onExecuted: () => {} } }),
    ).not.toThrow();
  });
});

describe('postgresTransactional values', () => {
  it.each([
    [{ lockTimeoutMs: '500' }, /^lockTimeoutMs must be a non-negative number, got "500"$/],
    [{ maxRetries: '3' }, /^maxRetries must be a non-negative integer, got "3"$/],
    [
      { busyRetryAfterMs: '1000' },
      /^busyRetryAfterMs must be a non-negative integer of ms, got "1000"$/,
    ],
    [{ prepare: 'true' }, /^prepare must be true, false or 'auto', got "true"$/],
    [
      { isolationLevel: 'SERIALIZABLE!' },
      /^isolationLevel must be one of .*, got "SERIALIZABLE!"$/,
    ],
  ])('refuses %o, showing the value with its type', (extra, message) => {
    // Act / Assert
    expect(() => build.postgresTransactional(extra)).toThrow(refusal(message));
  });
});
