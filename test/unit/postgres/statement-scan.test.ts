import { describe, expect, it } from 'vitest';
import { statementWords } from '../../../src/postgres/statement-scan.js';

describe('statementWords', () => {
  it('splits a simple query into its statements, skipping empty ones and what follows a non-word', () => {
    expect(statementWords(';; SELECT 1; rollback work to a ;; COMMIT', false)).toEqual([
      ['select'],
      ['rollback', 'work', 'to'],
      ['commit'],
    ]);
    expect(statementWords('(SELECT 1); "end"; x(1) end', false)).toEqual([['x']]);
  });

  it('keeps the `;` of a BEGIN ATOMIC body (and its CASE … END) inside the CREATE', () => {
    const text =
      'create or replace function f() returns int language sql begin /* c */ atomic ' +
      'select case when true then 1 end; select 2; end; commit';
    expect(statementWords(text, false)).toEqual([['create', 'or', 'replace'], ['commit']]);
  });

  it('reads a backslash before a quote in a plain string as the session setting says', () => {
    const text = "SELECT 'a\\'; COMMIT; --'";
    expect(statementWords(text, false)).toEqual([['select'], ['commit']]);
    expect(statementWords(text, true)).toEqual([['select']]);
  });

  it('reads an unclosed quote, comment or body to the end of the text (the server runs none of it)', () => {
    expect(statementWords("SELECT '; COMMIT", false)).toEqual([['select']]);
    expect(statementWords('SELECT /* /* */ ; COMMIT', false)).toEqual([['select']]);
    expect(statementWords('SELECT $x$ ; COMMIT', false)).toEqual([['select']]);
  });
});
