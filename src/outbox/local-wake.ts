/**
 * In-process wake-ups for relays over a SQLite database: `enqueue` signals the relays registered for the
 * same `Database` object, so the embedded default publishes without waiting for the next poll.
 *
 * The signal is deferred with `setImmediate`: better-sqlite3 transactions are synchronous, so by the time it
 * fires the caller's transaction has committed (or rolled back, in which case the relay finds nothing).
 * @module
 */

const listeners = new WeakMap<object, Set<() => void>>();

/** Register `wake` for enqueues on `database`; returns the function that unregisters it. */
export function onLocalEnqueue(database: object, wake: () => void): () => void {
  let set = listeners.get(database);
  if (set === undefined) {
    set = new Set();
    listeners.set(database, set);
  }
  set.add(wake);
  return () => {
    set.delete(wake);
  };
}

/** Wake the relays registered for `database`, once the current synchronous transaction is over. */
export function signalLocalEnqueue(database: object): void {
  const set = listeners.get(database);
  if (set === undefined || set.size === 0) return;
  setImmediate(() => {
    for (const wake of set) wake();
  });
}
