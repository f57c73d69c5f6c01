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
 * be written to. The wait is bounded by the store's call that holds the `end` (its `timeoutMs`).
 * @module
 */
import type { Socket } from 'node:net';

/** One socket's held responses: how many (pipelined requests share a socket), and a destroy waiting. */
interface Held {
  count: number;
  /** `destroy()` was called while an `end` was held. */
  destroyed: boolean;
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
  let entry = held.get(socket);
  if (entry === undefined) entry = wrap(socket);
  const state = entry;
  state.count++;
  let released = false;
  return () => {
    if (released) return;
    released = true;
    if (--state.count > 0 || !state.destroyed) return;
    state.destroyed = false;
    socket.destroy();
  };
}

function wrap(socket: Socket): Held {
  const entry: Held = { count: 0, destroyed: false };
  held.set(socket, entry);
  const destroy = socket.destroy;
  socket.destroy = function (this: Socket, ...args: unknown[]) {
    if (args[0] == null && entry.count > 0) {
      entry.destroyed = true;
      return this;
    }
    return (destroy as (...a: unknown[]) => Socket).apply(this, args);
  } as Socket['destroy'];
  return entry;
}

const noop = (): void => {};
