import { describe, expect, it } from 'vitest';
import { isInvalidOptionsError } from '../../../src/index.js';
import { renderSql, tableNames } from '../../../src/postgres/identifiers.js';
import { migrations } from '../../../src/postgres/migrations.gen.js';
import * as sql from '../../../src/postgres/sql.gen.js';

describe('tableNames', () => {
  it('quotes the defaults and derives every object name from the table', () => {
    // Arrange / Act
    const names = tableNames();
    // Assert
    expect(names).toMatchObject({
      schema: '"public"',
      table: '"public"."idempotency_records"',
      sequence: '"public"."idempotency_records_token_seq"',
      expiresIndex: '"idempotency_records_expires_at_idx"',
      migrationsTable: '"public"."idempotency_records_migrations"',
    });
  });

  it('keeps the case of mixed-case names by quoting them', () => {
    // Act
    const names = tableNames('Billing', 'Keys');
    // Assert
    expect(names.table).toBe('"Billing"."Keys"');
  });

  it.each([
    ['a quote', 'x"y'],
    ['a statement break', 'x; DROP TABLE y'],
    ['a dot', 'a.b'],
    ['a leading digit', '1abc'],
    ['a hyphen', 'a-b'],
    ['an empty name', ''],
    ['a table name too long for its derived names', 'a'.repeat(49)],
  ])('refuses %s with InvalidOptionsError', (_, bad) => {
    // Act
    const attempt = () => tableNames('public', bad);
    // Assert
    expect(attempt).toThrow(/table must be/);
    try {
      attempt();
    } catch (error) {
      expect(isInvalidOptionsError(error)).toBe(true);
    }
  });

  it('refuses a non-string schema', () => {
    // Act / Assert
    expect(() => tableNames(42, 't')).toThrow(/schema must be/);
  });
});

describe('renderSql', () => {
  it('fills every placeholder of every statement and migration', () => {
    // Arrange
    const names = tableNames('s', 't');
    const texts = [...Object.values(sql), ...migrations.map((m) => m.sql)];
    // Act
    const rendered = texts.map((text) => renderSql(text, names));
    // Assert
    for (const text of rendered) expect(text).not.toMatch(/\{\{/);
    expect(rendered.join('\n')).toContain('"s"."t"');
  });

  it('throws on an unknown placeholder instead of leaving it in the SQL', () => {
    // Act / Assert
    expect(() => renderSql('SELECT * FROM {{tableName}}', tableNames())).toThrow(
      /unknown SQL placeholder/,
    );
    expect(() => renderSql('SELECT {{nope}}', tableNames())).toThrow(/unknown SQL placeholder/);
  });

  it('creates a logged table, never an UNLOGGED one', () => {
    // Act
    const all = migrations.map((m) => m.sql).join('\n');
    // Assert
    expect(all).not.toMatch(/CREATE\s+UNLOGGED/i);
    expect(all).not.toMatch(/SET\s+UNLOGGED/i);
    expect(migrations.map((m) => m.id)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
  });
});
