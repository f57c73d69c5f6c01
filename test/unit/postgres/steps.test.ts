/**
 * The PostgreSQL store's side of recorded steps that needs no server: what `saveStep` and `loadSteps` send,
 * how rows become the steps object, the name check, that migration 0005 embeds the statements that keep
 * or clear the `steps` column as they are, and the hint a table without the column gets. The behaviour
 * itself is checked against a real server by the conformance suite and `test/integration/postgres`.
 */
import { describe, expect, it } from 'vitest';
import { isInvalidOptionsError, isStoreUnavailableError } from '../../../src/index.js';
import { toStoreError } from '../../../src/postgres/client.js';
import { renderSql, tableNames } from '../../../src/postgres/identifiers.js';
import { type PgQueryable, postgresStore } from '../../../src/postgres/index.js';
import { migrations } from '../../../src/postgres/migrations.gen.js';
import * as sql from '../../../src/postgres/sql.gen.js';
import { bareSql } from '../../helpers/bare-sql.js';

/** A client that records what it is sent and answers with the rows (and row count) given. */
function answering(
  rows: unknown[],
  rowCount = rows.length,
): { db: PgQueryable; sent: Array<{ text: string; values: unknown[] }> } {
  const sent: Array<{ text: string; values: unknown[] }> = [];
  const db: PgQueryable = {
    async query(text, values = []) {
      sent.push({ text, values });
      return { rows, rowCount };
    },
  };
  return { db, sent };
}

describe('postgresStore saveStep', () => {
  it('sends save-step.sql (through its function of 0008) with the name and the bytes in base64, one statement', async () => {
    // Arrange: a view into a larger buffer, whose own bytes only are sent.
    const { db, sent } = answering([], 1);
    const store = postgresStore({ pool: db });
    const view = new Uint8Array([9, 0, 255, 128, 9]).subarray(1, 4);
    // Act
    const saved = await store.saveStep('k', 7, 'ship.v2:eu-1_x', view);
    // Assert
    expect(saved).toBe(true);
    expect(sent).toEqual([
      {
        text: `SELECT 1 FROM ${tableNames().saveStepOneFunction}($1, $2, $3, $4) AS changed WHERE changed`,
        values: ['k', 7, 'ship.v2:eu-1_x', Buffer.from([0, 255, 128]).toString('base64')],
      },
    ]);
  });

  it('reports false when no row was updated (fenced out)', async () => {
    // Arrange
    const { db } = answering([], 0);
    const store = postgresStore({ pool: db });
    // Act / Assert
    expect(await store.saveStep('k', 7, 'charge', new Uint8Array([1]))).toBe(false);
  });

  it.each([
    ['an empty name', ''],
    ['a name longer than 100 characters', 'x'.repeat(101)],
    ['the lineage member', '#'],
    ['a quote', 'a"b'],
    ['a space', 'a b'],
    ['a non-ASCII letter', 'é'],
    ['a non-string', 42 as unknown as string],
  ])('rejects %s with InvalidOptionsError, sending nothing', async (_, name) => {
    // Arrange
    const { db, sent } = answering([], 1);
    const store = postgresStore({ pool: db });
    // Act
    const error = await store.saveStep('k', 7, name, new Uint8Array([1])).catch((e) => e);
    // Assert
    expect(isInvalidOptionsError(error)).toBe(true);
    expect(sent).toEqual([]);
  });

  it('accepts a name of 100 characters from the whole alphabet', async () => {
    // Arrange
    const { db, sent } = answering([], 1);
    const store = postgresStore({ pool: db });
    const name = 'aZ09._:-'.repeat(12).concat('abcd');
    // Act / Assert
    expect(name).toHaveLength(100);
    expect(await store.saveStep('k', 7, name, new Uint8Array())).toBe(true);
    expect(sent[0]?.values).toEqual(['k', 7, name, '']);
  });
});

describe('postgresStore loadSteps', () => {
  it('sends load-steps.sql with the key and the token', async () => {
    // Arrange
    const { db, sent } = answering([{ name: null, value: null }]);
    const store = postgresStore({ pool: db });
    // Act
    const steps = await store.loadSteps('k', 7);
    // Assert
    expect(steps).toEqual({});
    expect(sent).toEqual([{ text: renderSql(sql.loadSteps, tableNames()), values: ['k', 7] }]);
  });

  it('gives undefined when no row comes back (fenced out)', async () => {
    // Arrange
    const { db } = answering([]);
    const store = postgresStore({ pool: db });
    // Act / Assert
    expect(await store.loadSteps('k', 7)).toBeUndefined();
  });

  it('makes every name an own property, __proto__ and constructor included', async () => {
    // Arrange
    const b64 = (text: string) => Buffer.from(text).toString('base64');
    const { db } = answering([
      { name: '__proto__', value: b64('p') },
      { name: 'constructor', value: b64('c') },
      { name: 'charge', value: b64('ch') },
    ]);
    const store = postgresStore({ pool: db });
    // Act
    const steps = await store.loadSteps('k', 7);
    // Assert
    expect(steps).toBeDefined();
    expect(Object.getPrototypeOf(steps)).toBe(Object.prototype);
    expect(Object.keys(steps ?? {}).sort()).toEqual(['__proto__', 'charge', 'constructor']);
    expect(Object.hasOwn(steps ?? {}, '__proto__')).toBe(true);
    const proto = Object.getOwnPropertyDescriptor(steps, '__proto__')?.value as Uint8Array;
    expect(Buffer.from(proto).toString()).toBe('p');
    expect(Buffer.from(steps?.constructor as unknown as Uint8Array).toString()).toBe('c');
  });

  it('decodes each base64 value into bytes of its own, not a view of a shared pool', async () => {
    // Arrange: small values, which Buffer.from(…, 'base64') would place in Node's shared pool.
    const { db } = answering([
      { name: 'a', value: Buffer.from([1, 2]).toString('base64') },
      { name: 'b', value: Buffer.from([0, 255, 128]).toString('base64') },
      { name: 'empty', value: '' },
    ]);
    const store = postgresStore({ pool: db });
    // Act
    const steps = await store.loadSteps('k', 7);
    // Assert
    expect(steps?.a).toEqual(new Uint8Array([1, 2]));
    expect(steps?.b).toEqual(new Uint8Array([0, 255, 128]));
    expect(steps?.empty).toEqual(new Uint8Array());
    expect(steps?.a?.buffer.byteLength).toBe(2);
    expect(steps?.b?.buffer.byteLength).toBe(3);
  });
});

describe('the statements that keep or clear steps', () => {
  const keep =
    "steps = CASE WHEN r.status = 'in_progress' AND r.fingerprint = excluded.fingerprint THEN r.steps END";

  it.each([
    ['claim.sql', sql.claim],
    ['claim-bounded.sql', sql.claimBounded],
    ['claim-many.sql', sql.claimMany],
  ])('%s keeps steps for a takeover by the same fingerprint only', (_, text) => {
    expect(bareSql(text)).toContain(keep);
  });

  it.each([
    ['complete.sql', sql.complete],
    ['complete-many.sql', sql.completeMany],
  ])('%s clears the steps of the record it completes', (_, text) => {
    expect(bareSql(text)).toMatch(/SET status = 'completed'[^;]*, steps = NULL\n/);
  });
});

describe('migration 0005_reservations_and_steps', () => {
  const migration = migrations.find((m) => m.name === '0005_reservations_and_steps');

  it('is number 5, and the last to define claim_many and complete_claim, whose bodies the checks compare with the statements', () => {
    expect(migration?.id).toBe(5);
    const later = migrations.filter((m) => m.id > 5);
    // 0006 only sets a lock_timeout on two of them, 0007 their plan settings (ALTER FUNCTION … SET); 0007
    // also replaces complete_many's body, checked against complete-many.sql below; 0008 creates the single
    // statements' functions, checked against the statements in bounded-single-statements.test.ts.
    expect(later.map((m) => m.name)).toEqual([
      '0006_batch_lock_timeout',
      '0007_generic_batch_plans',
      '0008_bounded_single_statements',
    ]);
    const createdBy: Record<number, string[]> = {
      7: ['CREATE OR REPLACE FUNCTION {{completeManyFunction}}(text[],'],
      8: [
        'CREATE FUNCTION {{claimOneFunction}}(text,',
        'CREATE FUNCTION {{completeOneFunction}}(text,',
        'CREATE FUNCTION {{extendOneFunction}}(text,',
        'CREATE FUNCTION {{releaseOneFunction}}(text,',
        'CREATE FUNCTION {{saveStepOneFunction}}(text,',
      ],
    };
    for (const m of later) {
      const created = bareSql(m.sql).match(/CREATE (OR REPLACE )?FUNCTION \S+/gi) ?? [];
      expect(created).toEqual(createdBy[m.id] ?? []);
    }
  });

  it('adds the steps column as a nullable jsonb without a default', () => {
    expect(bareSql(migration?.sql ?? '')).toMatch(
      /^ALTER TABLE \{\{table\}\} ADD COLUMN steps jsonb;$/m,
    );
  });

  it('replaces complete_many in place, keeping its arguments, result, owner and grants', () => {
    const text = migration?.sql ?? '';
    expect(text).toContain(
      'CREATE OR REPLACE FUNCTION {{completeManyFunction}}(text[], bigint[], bytea[], float8[])',
    );
    expect(bareSql(text)).not.toMatch(/DROP FUNCTION IF EXISTS \{\{completeManyFunction\}\}/);
  });
});

describe('the newest migration that defines complete_many', () => {
  const defining = migrations.filter((m) =>
    m.sql.includes('FUNCTION {{completeManyFunction}}(text[], bigint[], bytea[], float8[])\n'),
  );
  const newest = defining[defining.length - 1];

  it('is 0007_generic_batch_plans, which replaces it in place', () => {
    expect(newest?.name).toBe('0007_generic_batch_plans');
    expect(newest?.sql).toContain(
      'CREATE OR REPLACE FUNCTION {{completeManyFunction}}(text[], bigint[], bytea[], float8[])',
    );
    expect(bareSql(newest?.sql ?? '')).not.toMatch(/DROP FUNCTION/);
  });

  it('has complete-many.sql, as it is, for its body', () => {
    // Arrange
    const text = newest?.sql ?? '';
    const create = text.indexOf('CREATE OR REPLACE FUNCTION {{completeManyFunction}}');
    const start = text.indexOf('  WITH done AS', create);
    const end = text.indexOf('IS TRUE;', text.indexOf('UNION ALL', start)) + 'IS TRUE;'.length;
    // Act
    const body = bareSql(text.slice(start, end));
    // Assert
    expect(create).toBeGreaterThan(0);
    expect(body).toBe(bareSql(sql.completeMany));
  });
});

describe('toStoreError on a table without the steps column', () => {
  it.each([
    ['an UPDATE target', 'column "steps" of relation "idempotency_records" does not exist'],
    ['a qualified reference', 'column r.steps does not exist'],
    ['a plain reference', 'column "steps" does not exist'],
  ])('says to migrate when %s is missing', (_, message) => {
    // Arrange
    const cause = Object.assign(new Error(message), { code: '42703' });
    // Act
    const error = toStoreError('saveStep', cause);
    // Assert
    expect(isStoreUnavailableError(error)).toBe(true);
    expect(error.cause).toBe(cause);
    expect(error.message).toMatch(/lacks migration 0005_reservations_and_steps: run migrate\(\)/);
  });

  it('adds no hint for a column whose name only contains "steps"', () => {
    // Arrange
    const cause = Object.assign(new Error('column "steps_done" does not exist'), { code: '42703' });
    // Act / Assert
    expect(toStoreError('transaction complete', cause).message).not.toMatch(/migrate/);
  });
});
