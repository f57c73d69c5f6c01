/**
 * Migration 0008's functions without a server: each body is its statement as it is (claim.sql, extend.sql,
 * release.sql, save-step.sql; complete.sql's two parts), and their settings bound every lock wait of the
 * call (the table's too, which claim-bounded.sql's own `set_config` comes too late for); what the store sends
 * to call them; and which lock timeouts mean "the key is in progress" (`isHeldRowTimeout`). The waits
 * themselves are checked against a real server in `test/integration/postgres/table-lock-timeout.test.ts`.
 */
import { describe, expect, it } from 'vitest';
import { isHeldRowTimeout } from '../../../src/postgres/held-key.js';
import { tableNames } from '../../../src/postgres/identifiers.js';
import { type PgQueryable, postgresStore } from '../../../src/postgres/index.js';
import { migrations } from '../../../src/postgres/migrations.gen.js';
import * as sql from '../../../src/postgres/sql.gen.js';
import { bareSql } from '../../helpers/bare-sql.js';

const migration = migrations.find((m) => m.name === '0008_bounded_single_statements');
const text = migration?.sql ?? '';

/** The text of the function `placeholder`'s definition in the migration, up to its closing `$fn$;`. */
function definition(placeholder: string): string {
  const start = text.indexOf(`CREATE FUNCTION {{${placeholder}}}(`);
  expect(start).toBeGreaterThan(0);
  return text.slice(start, text.indexOf('$fn$;', start));
}

/** A statement's body in a definition: from its first line to its first `;`. */
function body(definitionText: string, firstLine: string): string {
  const start = definitionText.indexOf(firstLine);
  expect(start).toBeGreaterThan(0);
  return bareSql(definitionText.slice(start, definitionText.indexOf(';', start) + 1));
}

describe('migration 0008_bounded_single_statements', () => {
  it.each([
    ['claimOneFunction', '  WITH claimed AS (', sql.claim],
    ['extendOneFunction', '  UPDATE {{table}}', sql.extend],
    ['releaseOneFunction', '  DELETE FROM {{table}}', sql.release],
    ['saveStepOneFunction', '  UPDATE {{table}}', sql.saveStep],
  ])('has the statement, as it is, for the body of {{%s}}', (placeholder, firstLine, statement) => {
    expect(body(definition(placeholder), firstLine)).toBe(bareSql(statement));
  });

  it('has complete.sql’s UPDATE, then its look-up of a completion by the same token, for the body of {{completeOneFunction}}', () => {
    // Arrange: complete.sql's two parts (its CTE's UPDATE, its second EXISTS).
    const statement = bareSql(sql.complete);
    const update = statement.slice(statement.indexOf('UPDATE'), statement.indexOf('\nRETURNING 1'));
    const lookUp = statement.slice(
      statement.indexOf('OR EXISTS (') + 3,
      statement.indexOf(' AS ok;'),
    );
    // Act
    const text = bareSql(definition('completeOneFunction'));
    // Assert: the UPDATE, and the look-up only if it changed nothing.
    expect(text).toContain(
      `BEGIN\n${update};\nIF FOUND THEN\nRETURN true;\nEND IF;\nRETURN ${lookUp};\nEND`,
    );
  });

  it.each(['claimOneFunction', 'releaseOneFunction'])(
    'gives {{%s}} a 100 ms lock_timeout, in force before its body takes any lock, and a plan kept per connection',
    (placeholder) => {
      // Act
      const header = bareSql(definition(placeholder)).split('AS $fn$')[0] ?? '';
      // Assert
      expect(header).toContain("SET lock_timeout = '100ms'");
      expect(header).toContain('SET plan_cache_mode = force_generic_plan');
      expect(header).toContain('SET enable_seqscan = off');
    },
  );

  // After the handler's effect, a call that gave up would let the lease run out behind the lock and a retry
  // run the handler again: these wait (a hang, never a second charge).
  it.each(['completeOneFunction', 'extendOneFunction', 'saveStepOneFunction'])(
    'gives {{%s}} no lock_timeout, and a plan kept per connection',
    (placeholder) => {
      // Act
      const header = bareSql(definition(placeholder)).split('AS $fn$')[0] ?? '';
      // Assert
      expect(header).not.toContain('lock_timeout');
      expect(header).toContain('SET plan_cache_mode = force_generic_plan');
      expect(header).toContain('SET enable_seqscan = off');
    },
  );

  it('leaves complete_many unbounded', () => {
    expect(bareSql(text)).not.toContain('completeManyFunction');
  });
});

describe('postgresStore single-key calls', () => {
  /** A client that records what it is sent and answers with `rows`. */
  function recording(rows: unknown[]): PgQueryable & { texts: string[] } {
    const texts: string[] = [];
    return {
      texts,
      async query(sent) {
        texts.push(sent);
        return { rows, rowCount: rows.length };
      },
    };
  }
  const names = tableNames();

  it.each([
    ['complete', `SELECT ${names.completeOneFunction}($1, $2, $3, $4) AS ok`],
    ['extend', `SELECT 1 FROM ${names.extendOneFunction}($1, $2, $3) AS changed WHERE changed`],
    ['release', `SELECT 1 FROM ${names.releaseOneFunction}($1, $2) AS changed WHERE changed`],
    [
      'saveStep',
      `SELECT 1 FROM ${names.saveStepOneFunction}($1, $2, $3, $4) AS changed WHERE changed`,
    ],
  ])('sends %s through its function of 0008', async (operation, expected) => {
    // Arrange: the answer of a call that changed its row.
    const db = recording([{ ok: true }]);
    const store = postgresStore({ pool: db });
    // Act
    const changed = await (operation === 'complete'
      ? store.complete('k', 7, new Uint8Array([1]), 1000)
      : operation === 'extend'
        ? store.extend('k', 7, 1000)
        : operation === 'release'
          ? store.release('k', 7)
          : store.saveStep('k', 7, 'charge', new Uint8Array([1])));
    // Assert
    expect(db.texts).toEqual([expected]);
    expect(changed).toBe(true);
  });

  it('answers false when the function changed nothing (no row back: fenced out)', async () => {
    // Arrange
    const store = postgresStore({ pool: recording([]) });
    // Act / Assert
    expect(await store.extend('k', 7, 1000)).toBe(false);
    expect(await store.release('k', 7)).toBe(false);
    expect(await store.saveStep('k', 7, 'charge', new Uint8Array([1]))).toBe(false);
  });
});

/** A PostgreSQL lock timeout as node-postgres rejects with it. */
const lockTimeout = (where?: string) =>
  Object.assign(new Error('canceling statement due to lock timeout'), { code: '55P03', where });

describe('isHeldRowTimeout', () => {
  it.each([
    ['an insert meeting an uncommitted row', 'while inserting index tuple (0,1) in relation "t"'],
    ['a row lock', 'while locking tuple (12,40) in relation "t"'],
    [
      'a row waited for inside a batch function',
      'while inserting index tuple (0,2) in relation "t"\nSQL statement "WITH input AS (…)"\nPL/pgSQL function s.t_claim_many(text[],text[],double precision[],double precision[]) line 4 at RETURN QUERY',
    ],
    ['a translated message', 'beim Einfügen von Indextupel (0,1) in Relation »t«'],
  ])('is true for %s (the key is in progress)', (_, where) => {
    expect(isHeldRowTimeout(lockTimeout(where))).toBe(true);
  });

  it.each([
    ['a top-level statement waiting for the table (no context)', undefined],
    [
      'the table waited for inside a function',
      'PL/pgSQL function s.t_claim_one(text,text,double precision,double precision) line 3 at RETURN QUERY',
    ],
    [
      'a row named only below the innermost line',
      'PL/pgSQL function s.f() line 3 at RETURN QUERY\nwhile locking tuple (0,1) in relation "t"',
    ],
  ])('is false for %s (the store is unavailable)', (_, where) => {
    expect(isHeldRowTimeout(lockTimeout(where))).toBe(false);
  });

  it('is false for any other error, a row named or not', () => {
    const other = Object.assign(new Error('deadlock detected'), {
      code: '40P01',
      where: 'while locking tuple (0,1) in relation "t"',
    });
    expect(isHeldRowTimeout(other)).toBe(false);
    expect(isHeldRowTimeout(undefined)).toBe(false);
  });
});
