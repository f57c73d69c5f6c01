/**
 * Which keys a crash left reserved, for operators after an incident: each such key answers another
 * request with a mismatch (HTTP 422) until its reservation ends, and lets its own request take over and
 * resume. {@link inspectKey} explains one key an operator already knows; {@link listCrashedKeys} finds them.
 * @module
 */
import type { Store } from '../store/store.js';
import { InvalidOptionsError } from './errors.js';
import { type KeyInspection, stateOf } from './inspection.js';

/** Which page of crashed keys {@link listCrashedKeys} reads. */
export interface ListCrashedKeysOptions {
  /** At most this many keys (a positive integer). */
  limit: number;
  /**
   * The previous page's `next` (absent for the first page): on the SQL and memory stores the last key of
   * that page (any key works: the page starts after it, in byte order); on Redis a `SCAN` position.
   */
  after?: string | undefined;
}

/** One page of {@link listCrashedKeys}. */
export interface CrashedKeysPage {
  /** Each crashed key as {@link inspectKey} reports it (`state: 'crashed'`, the record, the store clock). */
  keys: KeyInspection[];
  /** Pass as `after` to read the next page; absent when the listing is complete. */
  next?: string;
}

/**
 * One page of the keys whose holder crashed while their reservation still runs: the keys that
 * {@link inspectKey} would report as `crashed`, each in the same shape, judged by the store's clock. An
 * admin call (a scan of the store's records, never on a request's path), built on the store's optional
 * `listCrashed`, which every built-in store has.
 * @throws InvalidOptionsError when the store has no `listCrashed`, or for a bad `limit` or `after`.
 * @throws StoreUnavailableError when the store cannot be read.
 * @example
 * import { listCrashedKeys } from 'idempotency-kit';
 * let after: string | undefined;
 * do {
 *   const page = await listCrashedKeys(store, { limit: 100, after });
 *   for (const { storageKey, record } of page.keys) console.log(storageKey, record);
 *   after = page.next;
 * } while (after !== undefined);
 */
export async function listCrashedKeys(
  store: Store,
  options: ListCrashedKeysOptions,
): Promise<CrashedKeysPage> {
  if (store.listCrashed === undefined) {
    throw new InvalidOptionsError(
      `listCrashedKeys: the ${store.name} store cannot list crashed keys (it has no listCrashed method)`,
    );
  }
  const page = await store.listCrashed.call(store, options);
  const keys = page.records.map(
    ({ key, record, now }): KeyInspection => ({
      storageKey: key,
      // The store's listing and the record rules agree on a conforming store: this is 'crashed'.
      state: stateOf(record, now),
      record,
      now,
      source: 'inspect',
    }),
  );
  return page.next === undefined ? { keys } : { keys, next: page.next };
}
