/**
 * The paging of `Store.listCrashed` shared by the stores that list in key order (memory, SQLite,
 * PostgreSQL): the options check, and the cut of one row more than a page into the page and its `next`.
 * @module
 */
import { InvalidOptionsError } from '../core/errors.js';
import type { CrashedRecordsPage, ListCrashedOptions } from './store.js';

/**
 * `options` checked: `limit` a positive safe integer, `after` a string or absent.
 * @throws InvalidOptionsError otherwise (before anything is read).
 */
export function checkListCrashedOptions(
  options: ListCrashedOptions,
  storeName: string,
): ListCrashedOptions {
  const limit = options?.limit;
  if (!(Number.isSafeInteger(limit) && limit > 0)) {
    throw new InvalidOptionsError(
      `${storeName}: listCrashed limit must be a positive integer, got ${String(limit)}`,
    );
  }
  const after = options.after;
  if (after !== undefined && typeof after !== 'string') {
    throw new InvalidOptionsError(`${storeName}: listCrashed after must be a string`);
  }
  return after === undefined ? { limit } : { limit, after };
}

/**
 * A page of `limit` records from `rows`, read in key order with one row more than the page (`LIMIT
 * limit + 1`): that extra row only says a next page exists, and `next` is the page's last key, so the
 * next page starts right after it.
 */
export function keyOrderedPage(
  rows: CrashedRecordsPage['records'],
  limit: number,
): CrashedRecordsPage {
  if (rows.length <= limit) return { records: rows };
  const records = rows.slice(0, limit);
  return { records, next: (records.at(-1) as (typeof records)[number]).key };
}
