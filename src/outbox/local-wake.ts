/**
 * In-process wake-ups for relays over a SQLite database: `enqueue` signals the relays registered for the
 * same `Database` object and outbox table, so the embedded default publishes without waiting for the next
 * poll. Keyed by table too: two outbox tables in one file (two applications on one database) would
 * otherwise wake each other's relays, each for a claim that finds nothing.
 *
 * The signal is deferred with `setImmediate`: better-sqlite3 transactions are synchronous, so by the time it
 * fires the caller's transaction has committed (or rolled back, in which case the relay finds nothing).
 * @module
 */

const listeners = new WeakMap<object, Map<string, Set<() => void>>>();

// SQLite folds the case of ASCII identifiers, quoted ones too: `"Outbox"` and `"outbox"` are one table, and
// an enqueue spelling it one way must wake a relay that spells it the other.
const tableKey = (table: string) => table.toLowerCase();

/**
 * Register `wake` for enqueues into `table` on `database`; returns the function that unregisters it.
 * @param table - The outbox table's name (compared as SQLite does, ignoring ASCII case).
 */
export function onLocalEnqueue(database: object, table: string, wake: () => void): () => void {
  const key = tableKey(table);
  let tables = listeners.get(database);
  if (tables === undefined) {
    tables = new Map();
    listeners.set(database, tables);
  }
  let set = tables.get(key);
  if (set === undefined) {
    set = new Set();
    tables.set(key, set);
  }
  set.add(wake);
  return () => {
    set.delete(wake);
  };
}

/** Wake the relays registered for `table` on `database`, once the current synchronous transaction is over. */
export function signalLocalEnqueue(database: object, table: string): void {
  const set = listeners.get(database)?.get(tableKey(table));
  if (set === undefined || set.size === 0) return;
  setImmediate(() => {
    for (const wake of set) wake();
  });
}
