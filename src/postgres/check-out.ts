/**
 * Checking a dedicated connection out of a pool with its `'error'` listener attached the moment the pool
 * hands it over. node-postgres listens on idle connections only; `await pool.connect()` resumes a microtask
 * after the hand-over, and a backend that dies in between (its `FATAL 57P01` often arrives in the same TCP
 * read as the previous query's last reply, which is what freed the connection) emitted `'error'` with nobody
 * listening: an uncaught exception that crashed the process. pg-pool calls a `connect(callback)`'s callback
 * synchronously, inside that same read, so a listener attached there is in place before the next message is
 * parsed.
 * @module
 */
import { guardConnection, type PgQueryable } from './client.js';

/** A checked-out connection and the function that takes its guard off (call it just before `release`). */
export interface GuardedCheckOut<C> {
  /** The dedicated connection; the caller must `release()` it. */
  client: C;
  /** Remove the `'error'` listener this check-out attached. */
  unguard: () => void;
}

type ConnectCallback<C> = (error: Error | undefined | null, client?: C) => void;

/**
 * Check a connection out of `pool` with `onError` listening for its `'error'` events from the hand-over on.
 * A pool whose `connect()` takes no callback (it returns a promise and ignores the argument) still works:
 * the guard is then attached when the promise resolves, as well as such a pool allows.
 * @throws what the pool's `connect` threw or rejected with.
 */
export function checkOutGuarded<C extends PgQueryable>(
  pool: { connect(): Promise<C> },
  onError: (error: Error) => void,
): Promise<GuardedCheckOut<C>> {
  return new Promise((resolve, reject) => {
    let settled = false;
    const accept = (client: C) => {
      if (settled) return;
      settled = true;
      resolve({ client, unguard: guardConnection(client, onError) });
    };
    const refuse = (error: unknown) => {
      if (settled) return;
      settled = true;
      reject(error);
    };
    const callback: ConnectCallback<C> = (error, client) => {
      if (error) refuse(error);
      else if (client !== undefined) accept(client);
    };
    let returned: unknown;
    try {
      returned = (pool.connect as (callback: ConnectCallback<C>) => unknown).call(pool, callback);
    } catch (error) {
      refuse(error);
      return;
    }
    if (typeof (returned as PromiseLike<C> | undefined)?.then === 'function') {
      (returned as PromiseLike<C>).then(accept, refuse);
    }
  });
}
