import { describe, expect, it } from 'vitest';
import {
  endsTransaction,
  firstStatementWords,
  statementWords,
} from '../../../src/sqlite/statement-scan.js';

describe('firstStatementWords', () => {
  it.each<[string, string[]]>([
    ['ROLLBACK', ['rollback']],
    ['; ROLLBACK', ['rollback']],
    [';;\n/**/;commit;', ['commit']],
    ['/* a /* b */ ROLLBACK', ['rollback']],
    ['-- ; COMMIT\nrollback /* x */ transaction to sp', ['rollback', 'transaction', 'to']],
    ['"ROLLBACK"', []],
    ["'x'; ROLLBACK", []],
    ['SELECT 1; ROLLBACK', ['select']],
    ['rollback$x', ['rollback$x']],
    ['/* unclosed ROLLBACK', []],
  ])('reads %j as %j', (text, words) => {
    expect(firstStatementWords(text)).toEqual(words);
  });
});

describe('statementWords', () => {
  it.each<[string, string[][]]>([
    [
      'SELECT 1; ROLLBACK; INSERT INTO t VALUES (1)',
      [['select'], ['rollback'], ['insert', 'into', 't']],
    ],
    [';; ROLLBACK ;;', [['rollback']]],
    ["SELECT 'a;ROLLBACK', 'it''s; COMMIT'", [['select']]],
    ['SELECT "a;b", `c;d`, [e;f]; COMMIT', [['select'], ['commit']]],
    ['SELECT "a"";b"; END', [['select'], ['end']]],
    ['SELECT 1 -- ; ROLLBACK\n', [['select']]],
    ['SELECT 1 -- x\n; ROLLBACK', [['select'], ['rollback']]],
    ['/* a /* b */ ROLLBACK; /* c */', [['rollback']]],
    ['SELECT :end; END', [['select'], ['end']]],
    [
      'CREATE TRIGGER t AFTER INSERT ON x BEGIN DELETE FROM y; SELECT CASE WHEN 1 THEN 2 END; END; ROLLBACK',
      [['create', 'trigger', 't'], ['rollback']],
    ],
    [
      'create temporary trigger t after insert on x begin\n  insert into y values (1);\nend\n;commit',
      [['create', 'temporary', 'trigger'], ['commit']],
    ],
    [
      'CREATE TEMP TRIGGER t AFTER INSERT ON x BEGIN SELECT 1; END',
      [['create', 'temp', 'trigger']],
    ],
    [
      'EXPLAIN CREATE TRIGGER t BEGIN SELECT 1; END; COMMIT',
      [['explain', 'create', 'trigger'], ['commit']],
    ],
    ['CREATE TABLE trigger (a); COMMIT', [['create', 'table', 'trigger'], ['commit']]],
    ['CREATE TEMPORARY TABLE t (a); COMMIT', [['create', 'temporary', 'table'], ['commit']]],
    ['CREATE TRIGGER t BEGIN SELECT 1; ROLLBACK', [['create', 'trigger', 't']]],
    ['(SELECT 1); ROLLBACK', [['rollback']]],
  ])('splits %j into %j', (text, statements) => {
    expect(statementWords(text)).toEqual(statements);
  });
});

describe('endsTransaction', () => {
  it.each([
    ['begin'],
    ['begin', 'immediate'],
    ['commit'],
    ['end', 'transaction'],
    ['rollback'],
    ['rollback', 'transaction'],
  ])('refuses %j', (...words) => {
    expect(endsTransaction(words)).toBe(true);
  });

  it.each([
    ['rollback', 'to', 'sp'],
    ['rollback', 'transaction', 'to'],
    ['savepoint', 'sp'],
    ['release', 'sp'],
    ['explain', 'rollback'],
    ['select'],
    [],
  ])('lets %j through', (...words) => {
    expect(endsTransaction(words)).toBe(false);
  });
});
