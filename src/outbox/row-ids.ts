/**
 * Outbox row ids as the sources hand them out: decimal strings of 64-bit integers (PostgreSQL `bigint`,
 * SQLite `INTEGER`). Never through a JavaScript number: past `Number.MAX_SAFE_INTEGER` (2^53 − 1) two ids
 * round to the same number, and a row marked by the rounded id is another row.
 * @module
 */

/** Claim order: ascending row id, compared exactly. */
export function byRowId(a: { rowId: string }, b: { rowId: string }): number {
  const x = BigInt(a.rowId);
  const y = BigInt(b.rowId);
  return x < y ? -1 : x > y ? 1 : 0;
}

/**
 * `rowId` as an exact integer to bind to a SQLite statement (better-sqlite3 binds a `bigint` as a 64-bit
 * INTEGER). Throws a `SyntaxError` for a string that is not an integer, rather than matching no row or
 * another one.
 */
export function sqliteRowId(rowId: string): bigint {
  // BigInt() alone also takes '' (as 0), spaces around the digits and '0x…'.
  if (!/^-?\d+$/.test(rowId))
    throw new SyntaxError(`Not an outbox row id: ${JSON.stringify(rowId)}`);
  return BigInt(rowId);
}

/**
 * `rowIds` as a JSON array of integers, for `json_each`: SQLite reads JSON integers as 64-bit INTEGERs,
 * exactly. Each id is parsed first, so only integer literals reach the JSON text.
 */
export function sqliteRowIdsJson(rowIds: Iterable<string>): string {
  return `[${Array.from(rowIds, (rowId) => sqliteRowId(rowId).toString()).join(',')}]`;
}
