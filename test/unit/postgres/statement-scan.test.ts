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

  it('ends a BEGIN ATOMIC body at the END after a `;`, whatever columns named case or end it holds', () => {
    const body = (statements: string) =>
      `create function f() returns int language sql begin atomic ${statements} end; rollback`;
    // `AS case` is no CASE: counted as one, it kept the body open and hid the ROLLBACK after it.
    expect(statementWords(body('select 1 as case;'), false)).toEqual([
      ['create', 'function', 'f'],
      ['rollback'],
    ]);
    // `AS end` and `t.end` are no END: read as one, the body's own END became a statement (refused).
    expect(statementWords(body('select 1 as end; select t.end from t;'), false)).toEqual([
      ['create', 'function', 'f'],
      ['rollback'],
    ]);
    // An empty body, and empty statements in it.
    expect(statementWords(body(';;'), false)).toEqual([['create', 'function', 'f'], ['rollback']]);
  });

  it("reads a literal's continuation (a `'…'` after a newline) as the literal it continues", () => {
    // The continuation of E'' takes backslash escapes: `\'` is a quote inside it, in either reading, so
    // the reading without escapes in plain strings (standard_conforming_strings on) sees the ROLLBACK.
    const text = "SELECT E''\n'\\' '|| '\\'; ROLLBACK; --'";
    expect(statementWords(text, false)).toEqual([['select'], ['rollback']]);
    expect(statementWords(text, true)).toEqual([['select']]);
    // Through a comment line; not on the same line (no continuation there: the server refuses the text).
    expect(statementWords("SELECT E'' -- c\n\n'\\'; COMMIT; --'", false)).toEqual([['select']]);
    expect(statementWords("SELECT E'' '\\'; COMMIT; --'", false)).toEqual([['select'], ['commit']]);
    // A B'' continued is read without escapes even when plain strings take them.
    expect(statementWords("SELECT B''\n'\\'; COMMIT; --'", true)).toEqual([['select'], ['commit']]);
  });

  it('reads a long text in time linear in its length', () => {
    // A long comment after a literal is looked at for a continuation once, not once per `-`.
    const text = `SELECT 'a' ${'-'.repeat(200_000)}`;
    const started = performance.now();
    statementWords(text, false);
    expect(performance.now() - started).toBeLessThan(2_000);
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
