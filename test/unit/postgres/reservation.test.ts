/**
 * The PostgreSQL store's side of `ClaimOptions.reserveMs` that needs no server: what the claim statements
 * are sent, that migration 0005's batch function embeds the claim-many statement as it is, and the hint a
 * schema not yet migrated to 0005 gets. The behaviour itself is checked against a real server by the
 * conformance suite and `test/integration/postgres`.
 */
import { describe, expect, it } from 'vitest';
import { isInvalidOptionsError, isStoreUnavailableError } from '../../../src/index.js';
import { toStoreError } from '../../../src/postgres/client.js';
import { renderSql, tableNames } from '../../../src/postgres/identifiers.js';
import { type PgQueryable, postgresStore } from '../../../src/postgres/index.js';
import { migrations } from '../../../src/postgres/migrations.gen.js';
import * as sql from '../../../src/postgres/sql.gen.js';
import { bareSql } from '../../helpers/bare-sql.js';

/** A client that records what it is sent and answers every statement with one claimed row. */
function recording(): { db: PgQueryable; sent: Array<{ text: string; values: unknown[] }> } {
  const sent: Array<{ text: string; values: unknown[] }> = [];
  const db: PgQueryable = {
    async query(text, values = []) {
      sent.push({ text, values });
      const keys = Array.isArray(values[0]) ? (values[0] as string[]) : ['k'];
      const rows = keys.map((key) => ({
        key,
        claimed: true,
        token: '7',
        attempt: 1,
        expires_at_ms: 1,
      }));
      return { rows, rowCount: rows.length };
    },
  };
  return { db, sent };
}

describe('postgres claims with reserveMs', () => {
  it.each([
    ['a reservation above the lease', { leaseMs: 1000, reserveMs: 86_400_000 }, 86_400_000],
    ['no reservation', { leaseMs: 1000 }, 0],
    ['a reservation equal to the lease', { leaseMs: 1000, reserveMs: 1000 }, 0],
    ['a reservation below the lease', { leaseMs: 1000, reserveMs: 10 }, 0],
  ])('sends %s as the claim statement’s $4', async (_, options, expected) => {
    // Arrange
    const { db, sent } = recording();
    const store = postgresStore({ pool: db });
    // Act
    await store.claim('k', { fingerprint: 'fp', ...options });
    // Assert
    expect(sent).toHaveLength(1);
    expect(sent[0]?.text).toBe(`SELECT * FROM ${tableNames().claimOneFunction}($1, $2, $3, $4)`);
    expect(sent[0]?.values).toEqual(['k', 'fp', 1000, expected]);
  });

  it('refuses a NaN or negative reservation as the caller’s mistake, sending nothing', async () => {
    // Arrange
    const { db, sent } = recording();
    const store = postgresStore({ pool: db });
    // Act
    const errors = await Promise.all(
      [Number.NaN, -1].map((reserveMs) =>
        store.claim('k', { fingerprint: 'fp', leaseMs: 1000, reserveMs }).catch((e: unknown) => e),
      ),
    );
    // Assert
    for (const error of errors) {
      expect(isInvalidOptionsError(error)).toBe(true);
      expect(isStoreUnavailableError(error)).toBe(false);
    }
    expect(sent).toEqual([]);
  });

  it('sends the reservations of a batch as the fourth array of the claim_many function', async () => {
    // Arrange
    const { db, sent } = recording();
    const store = postgresStore({ pool: db });
    // Act
    await store.claimMany?.([
      { key: 'a', fingerprint: 'fa', leaseMs: 1000, reserveMs: 60_000 },
      { key: 'b', fingerprint: 'fb', leaseMs: 1000 },
    ]);
    // Assert
    expect(sent.map(({ text }) => text)).toEqual([
      'SELECT * FROM "public"."idempotency_records_claim_many"($1, $2, $3, $4)',
    ]);
    expect(sent[0]?.values).toEqual([
      ['a', 'b'],
      ['fa', 'fb'],
      [1000, 1000],
      [60_000, 0],
    ]);
  });

  it('sends the claims’ reservations as the last array of the complete_claim function', async () => {
    // Arrange
    const { db, sent } = recording();
    const store = postgresStore({ pool: db });
    // Act
    await store.completeAndClaimMany?.(
      [],
      [
        { key: 'a', fingerprint: 'fa', leaseMs: 1000, reserveMs: 60_000 },
        { key: 'b', fingerprint: 'fb', leaseMs: 1000, reserveMs: 5 },
      ],
    );
    // Assert
    expect(sent[0]?.text).toBe(
      'SELECT * FROM "public"."idempotency_records_complete_claim"($1, $2, $3, $4, $5, $6, $7, $8)',
    );
    expect(sent[0]?.values.slice(4)).toEqual([
      ['a', 'b'],
      ['fa', 'fb'],
      [1000, 1000],
      [60_000, 0],
    ]);
  });
});

describe('migration 0005_reservations_and_steps', () => {
  const migration = migrations.find((m) => m.name === '0005_reservations_and_steps');

  it('embeds claim-many.sql, as it is, in the claim_many function it creates', () => {
    // Arrange
    const text = migration?.sql ?? '';
    const start = text.indexOf('  WITH input AS');
    const end = text.indexOf('FROM blocking;', start) + 'FROM blocking;'.length;
    // Act
    const body = bareSql(text.slice(start, end));
    // Assert
    expect(start).toBeGreaterThan(0);
    expect(body).toBe(bareSql(sql.claimMany));
  });

  it('replaces both functions that embed the claim, and adds a nullable column without a default', () => {
    // Act
    const text = bareSql(migration?.sql ?? '');
    // Assert
    expect(text).toMatch(/^ALTER TABLE \{\{table\}\} ADD COLUMN reserved_until timestamptz;$/m);
    expect(text).toContain(
      'DROP FUNCTION IF EXISTS {{claimManyFunction}}(text[], text[], float8[]);',
    );
    expect(text).toMatch(/DROP FUNCTION IF EXISTS \{\{completeClaimFunction\}\}\(\n/);
    expect(text).toContain(
      'CREATE FUNCTION {{claimManyFunction}}(text[], text[], float8[], float8[])',
    );
    expect(text).toContain('FROM {{claimManyFunction}}($5, $6, $7, $8) AS m;');
  });
});

describe('the claim statements', () => {
  it('name the table within the first kilobyte, all pg_stat_activity shows of a statement', () => {
    // Arrange: a schema name as long as the test suites' own.
    const names = tableNames('ik_conformance_12345_abcdef12');
    for (const text of [sql.claim, sql.claimMany]) {
      // Act
      const rendered = renderSql(text, names);
      // Assert
      const end = rendered.indexOf(names.table) + names.table.length;
      expect(Buffer.byteLength(rendered.slice(0, end))).toBeLessThan(1024);
    }
  });
});

describe('toStoreError on a schema behind the code', () => {
  it('says to migrate when a statement names a column a later migration adds', () => {
    // Arrange
    const cause = Object.assign(
      new Error('column "reserved_until" of relation "idempotency_records" does not exist'),
      { code: '42703' },
    );
    // Act
    const error = toStoreError('claim', cause);
    // Assert
    expect(isStoreUnavailableError(error)).toBe(true);
    expect(error.cause).toBe(cause);
    expect(error.message).toMatch(/lacks migration 0005_reservations_and_steps: run migrate\(\)/);
  });

  it('adds no hint for any other missing column', () => {
    // Arrange
    const cause = Object.assign(new Error('column "amount" does not exist'), { code: '42703' });
    // Act
    const error = toStoreError('transaction complete', cause);
    // Assert
    expect(error.message).not.toMatch(/migrate/);
  });
});
