/**
 * Outbox row ids bound to SQLite exactly, and only integer literals: `BigInt()` alone took `''` for row 0,
 * `' 7 '` for row 7 and `'0x10'` for row 16, a mark of a row the caller never named.
 */
import { describe, expect, it } from 'vitest';
import { sqliteRowId, sqliteRowIdsJson } from '../../../src/outbox/row-ids.js';

describe('outbox row ids for SQLite', () => {
  it('binds an id past 2^53 exactly', () => {
    expect(sqliteRowId('9007199254740993')).toBe(9007199254740993n);
    expect(sqliteRowIdsJson(['9007199254740993', '-1'])).toBe('[9007199254740993,-1]');
  });

  it.each([[''], [' 7 '], ['0x10'], ['1e3'], ['7.0'], ['+7']])('refuses %j', (rowId) => {
    expect(() => sqliteRowId(rowId)).toThrow(SyntaxError);
    expect(() => sqliteRowIdsJson(['1', rowId])).toThrow(SyntaxError);
  });
});
