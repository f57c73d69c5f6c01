/**
 * Keeping a connection open for the response whose `end` the capture holds: Express's final handler,
 * reached by an error after the head went out (a handler that throws or calls `next(err)` after
 * `res.json`, an error handler's `if (res.headersSent) return next(err)`), closes the connection with
 * `req.socket.destroy()`. Without the layer, the handler's `end` had written the whole response before
 * that, and the client got it. With the `end` held until its outcome is stored, the destroy came first: the
 * client got no response at all (the retry got the replay). So, while an `end` is held, a `destroy()` of
 * its socket without an error waits for it, and is made once the held response has been written, as it
 * was made right after it without the layer.
 *
 * Only a destroy without an error waits: one with an error is the connection failing, which nothing can
 * be written to. And it waits {@link HELD_DESTROY_LIMIT_MS} at most: the same call is a shutdown's
 * `closeAllConnections()`, a server timeout, or Node's own close after the client left, and the store call
 * holding the `end` can take much longer (a completion is retried for the lease, 30 s by default, through
 * a store outage; a store without timeouts may never answer). Unbounded, a deploy during a Redis outage
 * waited out the lease to close (10 s with a 10 s lease, measured), and a connection whose store never
 * answered stayed open for good. An answer stored within the limit goes out, as without the layer.
 * @module
 */
import type { Socket } from 'node:net';

/**
 * How long a `destroy()` of a socket whose `end` is held waits for it, in ms, at most. Long enough for a
 * store's completion on a working store (milliseconds), short enough that a shutdown or a server timeout
 * is barely delayed when the store is failing.
 */
export const HELD_DESTROY_LIMIT_MS = 2000;

/** One socket's held responses: how many (pipelined requests share a socket), and a destroy waiting. */
interface Held {
  count: number;
  /** `destroy()` was called while an `end` was held. */
  destroyed: boolean;
  /** Makes the waiting destroy once {@link HELD_DESTROY_LIMIT_MS} have passed. */
  limit: NodeJS.Timeout | undefined;
  /** The socket's own `destroy`, which the wrapper replaced. */
  destroy: (...args: unknown[]) => Socket;
}

const held = new WeakMap<object, Held>();

/**
 * Make a `destroy()` of `socket` without an error wait until the returned function is called (after the
 * held `end` was applied). The socket's `destroy` is wrapped on its first held `end` and stays wrapped
 * (one property per connection, not one per request: a kept-alive connection serves many); with nothing
 * held, the wrapper goes straight through to the `destroy` it wraps.
 * @returns Release the hold: once no response of the socket is held, the waiting destroy is made.
 */
export function holdSocket(socket: Socket | null | undefined): () => void {
  if (socket === null || socket === undefined) return noop;
  const state = held.get(socket) ?? wrap(socket);
  state.count++;
  let released = false;
  return () => {
    if (released) return;
    released = true;
    if (--state.count > 0 || !state.destroyed) return;
    destroyNow(socket, state);
  };
}

/** Make the destroy that waited: the last held `end` was applied, or the limit passed. */
function destroyNow(socket: Socket, entry: Held): void {
  entry.destroyed = false;
  if (entry.limit !== undefined) clearTimeout(entry.limit);
  entry.limit = undefined;
  entry.destroy.call(socket);
}

function wrap(socket: Socket): Held {
  const destroy = socket.destroy as (...args: unknown[]) => Socket;
  const entry: Held = { count: 0, destroyed: false, limit: undefined, destroy };
  held.set(socket, entry);
  socket.destroy = function (this: Socket, ...args: unknown[]) {
    if (args[0] == null && entry.count > 0) {
      entry.destroyed = true;
      // Unref'd: a process exiting does not wait for it (the socket goes with the process).
      entry.limit ??= setTimeout(() => destroyNow(socket, entry), HELD_DESTROY_LIMIT_MS).unref();
      return this;
    }
    // Destroyed now (an error, or nothing held): a destroy that waited has nothing left to do.
    if (entry.limit !== undefined) clearTimeout(entry.limit);
    entry.limit = undefined;
    entry.destroyed = false;
    return destroy.apply(this, args);
  } as Socket['destroy'];
  return entry;
}

const noop = (): void => {};
