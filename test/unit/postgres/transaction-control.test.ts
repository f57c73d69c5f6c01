import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import {
  isTransactionControl,
  watchTransactionStatus,
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
    // Later among several statements of a simple query: the server runs them all.
    'SELECT 1; COMMIT',
    '; SELECT 1; COMMIT',
    'SELECT 1; ROLLBACK; INSERT INTO charges (ref) VALUES (1)',
    'select 1; rollback and chain; insert into charges values (1)',
    'SELECT 1; /* a /* nested */ note */ ROLLBACK',
    'SELECT 1 -- note\n; ABORT',
    'SELECT 1;\r--x\rEND',
    'SELECT $$x;$$; COMMIT',
    'SELECT $a$ $b$; x $a$; COMMIT',
    "SELECT ';'; COMMIT",
    "SELECT E'\\''; COMMIT",
    'SELECT "a;""b"; COMMIT',
    'SELECT a$b$; COMMIT',
    // A backslash before a quote ends the string with standard_conforming_strings on, not with it off.
    "SELECT 'x\\''; ROLLBACK; --'",
    "SELECT 'x\\'; ROLLBACK; --'",
    'CREATE FUNCTION f() RETURNS int LANGUAGE sql BEGIN ATOMIC SELECT 1; END; ROLLBACK',
    'CREATE FUNCTION begin() RETURNS int LANGUAGE sql AS $$ SELECT 1 $$; ROLLBACK',
    'CREATE FUNCTION f(begin atomic) RETURNS int LANGUAGE sql RETURN 1; ROLLBACK',
    { text: 'SELECT 1; COMMIT', values: [] },
    { cursor: { text: 'COMMIT' }, submit: () => {} },
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
    'ending',
    '/* a /* nested */ COMMIT */ SELECT 1',
    'ROLLBACK/**/TO sp',
    'rollback -- to the savepoint\n to a',
    'DO $$ BEGIN PERFORM 1; END $$',
    'WITH begin AS (SELECT 1) SELECT * FROM begin',
    // Inside a string, a dollar quote, a quoted identifier or a comment, a COMMIT is no statement.
    "SELECT '; COMMIT'",
    "SELECT 'it''s; COMMIT'",
    "SELECT E'\\'; COMMIT'",
    "SELECT B'01'; SELECT X'1f'; SELECT N'; COMMIT'",
    "SELECT U&'d\\0061t; COMMIT'",
    'SELECT $$; COMMIT$$',
    'SELECT $fn$ $$; COMMIT $$ $fn$',
    'SELECT "; COMMIT"',
    'SELECT 1; -- ; COMMIT\nSELECT 2',
    'SELECT 1 /* ; COMMIT /* ; */ ; COMMIT */',
    'SELECT $1::int; SELECT 2',
    'SAVEPOINT a; ROLLBACK TO a; RELEASE a',
    // A SQL-standard routine body: its `;` and END are its own.
    'CREATE FUNCTION f() RETURNS int LANGUAGE sql BEGIN ATOMIC SELECT 1; SELECT CASE WHEN true THEN 2 END; END; SELECT f()',
    'create or replace procedure p() language sql begin atomic insert into t values (1); end',
    'SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY',
    { text: 'SELECT 1' },
    { submit: () => {} },
    undefined,
  ])('lets %j through', (statement) => {
    expect(isTransactionControl(statement)).toBe(false);
  });
});

describe('watchTransactionStatus', () => {
  it('reads getTransactionStatus where node-postgres has it', () => {
    let status = 'T';
    const watch = watchTransactionStatus({ getTransactionStatus: () => status });
    expect(watch.idle()).toBe(false);
    status = 'I';
    expect(watch.idle()).toBe(true);
    watch.stop();
  });

  it('listens to the connection’s readyForQuery before node-postgres 8.21, until stopped', () => {
    const connection = new EventEmitter();
    const watch = watchTransactionStatus({ connection });
    connection.emit('readyForQuery', { status: 'T' });
    expect(watch.idle()).toBe(false);
    connection.emit('readyForQuery', { status: 'I' });
    expect(watch.idle()).toBe(true);
    watch.stop();
    expect(connection.listenerCount('readyForQuery')).toBe(0);
  });

  it('tells nothing, without throwing, when getTransactionStatus throws (pg.native over pg-native < 3.8)', () => {
    const native = {
      getTransactionStatus: () => {
        throw new TypeError('this.native.getTransactionStatus is not a function');
      },
    };
    expect(watchTransactionStatus(native).idle()).toBe(false);
  });

  it('is never idle for a client that tells nothing', () => {
    expect(watchTransactionStatus({ query: () => {} }).idle()).toBe(false);
    expect(watchTransactionStatus(null).idle()).toBe(false);
  });
});
