/**
 * Schema and table names: validated, double-quoted identifiers substituted into the SQL files'
 * `{{placeholders}}`. Names are never taken from request data, but they still come from configuration, so
 * they are checked strictly (letters, digits, underscores) rather than escaped: no injection is possible.
 * @module
 */
import { InvalidOptionsError } from '../core/errors.js';

/** Default schema of the records table. */
export const DEFAULT_SCHEMA = 'public';
/** Default name of the records table. */
export const DEFAULT_TABLE = 'idempotency_records';

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/;
// PostgreSQL truncates identifiers at 63 bytes; the table name leaves room for the longest derived
// name (`<table>_expires_at_idx`), so two tables can never collide after truncation.
const MAX_SCHEMA_LENGTH = 63;
const MAX_TABLE_LENGTH = 48;

/** Where the store's objects live, as quoted SQL identifiers. */
export interface TableNames {
  /** Unquoted schema name (for messages and advisory-lock keys). */
  schemaName: string;
  /** Unquoted table name. */
  tableName: string;
  /** `"schema"` */
  schema: string;
  /** `"schema"."table"` */
  table: string;
  /** `"schema"."table_token_seq"` */
  sequence: string;
  /** `"table_expires_at_idx"` (an index always lives in its table's schema) */
  expiresIndex: string;
  /** `"schema"."table_migrations"`: the schema-version table */
  migrationsTable: string;
  /** `"schema"."table_claim_many"`: the batch claim as a function (migration 0003, replaced in 0005) */
  claimManyFunction: string;
  /** `"schema"."table_complete_many"`: the batch completion as a function (migration 0003, body replaced in 0005) */
  completeManyFunction: string;
  /** `"schema"."table_complete_claim"`: completions then claims in one call (migration 0004, replaced in 0005) */
  completeClaimFunction: string;
  /** `"schema"."table_claim_one"`: the claim sent alone, its lock waits bounded (migration 0008) */
  claimOneFunction: string;
  /** `"schema"."table_complete_one"`: complete.sql, its lock waits bounded (migration 0008) */
  completeOneFunction: string;
  /** `"schema"."table_extend_one"`: extend.sql, its lock waits bounded (migration 0008) */
  extendOneFunction: string;
  /** `"schema"."table_release_one"`: release.sql, its lock waits bounded (migration 0008) */
  releaseOneFunction: string;
  /** `"schema"."table_save_step_one"`: save-step.sql, its lock waits bounded (migration 0008) */
  saveStepOneFunction: string;
}

function checkIdentifier(option: string, value: unknown, maxLength: number): string {
  if (typeof value !== 'string' || !IDENTIFIER.test(value) || value.length > maxLength) {
    throw new InvalidOptionsError(
      `${option} must be 1-${maxLength} letters, digits or underscores, not starting with a digit; got ${JSON.stringify(value)}`,
    );
  }
  return value;
}

const quote = (name: string) => `"${name}"`;

/**
 * Validate `schema` and `table` and build every quoted name the SQL needs.
 * @throws InvalidOptionsError when a name is not a plain identifier.
 */
export function tableNames(
  schema: unknown = DEFAULT_SCHEMA,
  table: unknown = DEFAULT_TABLE,
): TableNames {
  const schemaName = checkIdentifier('schema', schema, MAX_SCHEMA_LENGTH);
  const tableName = checkIdentifier('table', table, MAX_TABLE_LENGTH);
  const qualified = (name: string) => `${quote(schemaName)}.${quote(name)}`;
  const functions = batchFunctionNames(tableName);
  return {
    schemaName,
    tableName,
    schema: quote(schemaName),
    table: qualified(tableName),
    sequence: qualified(`${tableName}_token_seq`),
    expiresIndex: quote(`${tableName}_expires_at_idx`),
    migrationsTable: qualified(`${tableName}_migrations`),
    claimManyFunction: qualified(functions.claimMany),
    completeManyFunction: qualified(functions.completeMany),
    completeClaimFunction: qualified(functions.completeClaim),
    claimOneFunction: qualified(functions.claimOne),
    completeOneFunction: qualified(functions.completeOne),
    extendOneFunction: qualified(functions.extendOne),
    releaseOneFunction: qualified(functions.releaseOne),
    saveStepOneFunction: qualified(functions.saveStepOne),
  };
}

/** The unquoted names of a table's functions (the batches', and the single statements' of 0008), by the store operation each serves. */
export interface BatchFunctionNames {
  /** `<table>_claim_many` (migration 0003; 0005 replaces it with a version that takes reservations) */
  claimMany: string;
  /** `<table>_complete_many` (migration 0003; 0005 replaces its body, which then clears the steps) */
  completeMany: string;
  /**
   * `<table>_complete_claim` (migration 0004; 0005 replaces it with a version that takes reservations); its
   * suffix fits the room the table name leaves.
   */
  completeClaim: string;
  /** `<table>_claim_one` (migration 0008): the claim sent alone, every lock wait of it bounded */
  claimOne: string;
  /** `<table>_complete_one` (migration 0008) */
  completeOne: string;
  /** `<table>_extend_one` (migration 0008) */
  extendOne: string;
  /** `<table>_release_one` (migration 0008) */
  releaseOne: string;
  /** `<table>_save_step_one` (migration 0008); its suffix fits the room the table name leaves. */
  saveStepOne: string;
}

/**
 * The unquoted names of a table's functions (migrations 0003, 0004, 0005 and 0008): what `tableNames` quotes,
 * and what PostgreSQL's messages about them spell.
 */
export function batchFunctionNames(tableName: string): BatchFunctionNames {
  return {
    claimMany: `${tableName}_claim_many`,
    completeMany: `${tableName}_complete_many`,
    completeClaim: `${tableName}_complete_claim`,
    claimOne: `${tableName}_claim_one`,
    completeOne: `${tableName}_complete_one`,
    extendOne: `${tableName}_extend_one`,
    releaseOne: `${tableName}_release_one`,
    saveStepOne: `${tableName}_save_step_one`,
  };
}

/**
 * Fill a SQL file's `{{placeholders}}` with quoted names.
 * @throws Error when the SQL names a placeholder that does not exist (a bug in a .sql file).
 */
export function renderSql(sql: string, names: TableNames): string {
  return sql.replace(/\{\{(\w+)\}\}/g, (_, name: string) => {
    const value = (names as unknown as Record<string, unknown>)[name];
    if (typeof value !== 'string' || name === 'schemaName' || name === 'tableName') {
      throw new Error(`unknown SQL placeholder {{${name}}}`);
    }
    return value;
  });
}
