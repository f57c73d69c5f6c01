/**
 * Factory module loaded by child processes (the cross-process claim storm, the concurrent migration test):
 * opens the SQLite file it is given as a store of its own.
 * @module
 */

import { sqliteStore } from '../../../src/sqlite/index.js';
import type { Store } from '../../../src/store/store.js';

/** Open `file` (WAL, default busy timeout) and migrate it, as every process sharing a file would. */
export function createStore(file: unknown): Store {
  if (typeof file !== 'string') throw new Error('createStore expects the SQLite file path');
  return sqliteStore({ database: file });
}
