import { describe, expect, it } from 'vitest';
import {
  isTransactionControl,
  transactionEnded,
} from '../../../src/postgres/transaction-control.js';

describe('isTransactionControl', () => {
  it.each([
    'COMMIT',
    'commit;',
    'END',
    'ABORT',
    'ROLLBACK',
    'rollback work',
    'ROLLBACK AND CHAIN',
    'BEGIN',
    'begin isolation level serializable',
    'START TRANSACTION',
    "PREPARE TRANSACTION 'x'",
    '  -- finish\n  COMMIT',
    '/* done */COMMIT',
    '/* a /* nested */ note */ COMMIT',
    'ROLLBACK/**/',
    "prepare/* x */transaction 't'",
    '; ROLLBACK',
    ';;/* empty */ ;\nCOMMIT',
    { text: ';commit' },
    { text: 'COMMIT' },
  ])('refuses %j', (statement) => {
    expect(isTransactionControl(statement)).toBe(true);
  });

  it.each([
    'SAVEPOINT a',
    'ROLLBACK TO SAVEPOINT a',
    'rollback to a',
    'ROLLBACK TRANSACTION TO a',
    'RELEASE SAVEPOINT a',
    'PREPARE ins AS INSERT INTO t VALUES ($1)',
    'INSERT INTO commits (id) VALUES (1)',
    'SELECT 1; COMMIT',
    '; SELECT 1; COMMIT',
    'ending',
    '/* a /* nested */ COMMIT */ SELECT 1',
    'ROLLBACK/**/TO sp',
    'rollback -- to the savepoint\n to a',
    'DO $$ BEGIN PERFORM 1; END $$',
    'WITH begin AS (SELECT 1) SELECT * FROM begin',
    { text: 'SELECT 1' },
    { submit: () => {} },
    undefined,
  ])('lets %j through', (statement) => {
    expect(isTransactionControl(statement)).toBe(false);
  });
});

describe('transactionEnded', () => {
  it('reads node-postgres’s transaction status, and knows nothing without it', () => {
    expect(transactionEnded({ getTransactionStatus: () => 'I' })).toBe(true);
    expect(transactionEnded({ getTransactionStatus: () => 'T' })).toBe(false);
    expect(transactionEnded({ getTransactionStatus: () => 'E' })).toBe(false);
    expect(transactionEnded({ getTransactionStatus: () => null })).toBe(false);
    expect(transactionEnded({ query: () => {} })).toBe(false);
  });
});
