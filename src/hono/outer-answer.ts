/**
 * The handler's answer, kept when a middleware before the layer answered while the handler ran on.
 * `hono/timeout` (and any timeout written as a `Promise.race` on `next()`) rejects once its time is up:
 * Hono renders that rejection through onError, sets the reply on `c.res` (finalizing the context) and
 * sends it, while the layer's `next()`, and the handler under it, go on. When the handler answers, Hono
 * drops its answer (the context is finalized). Judged by the timeout's 504, the key was released, and
 * the retry ran the handler, and its charge, a second time. The handler's work is done: its own answer is
 * stored (a 201 is replayed to every retry; a 5xx releases the key, as it would have), as Fastify's
 * `handlerTimeout` and Express's `connect-timeout` are handled.
 *
 * Told apart from an error of the handler (or of a middleware between the layer and the handler) that Hono
 * rendered, which still releases the key on a 5xx, by order, not by the exception's class or status (the
 * timeout's exception is the application's choice): what the chain under the layer answers, or renders
 * for its error, is set on `c.res` before the layer's `next()` settles, so an answer given after the last
 * `c.res` set never reached it (`./handler-answer.ts`), unless given in the task that made that set (its
 * callback and the microtasks it leads to): then it is a middleware before the layer answering again
 * after its `next()` as Hono unwinds it, which Hono ignores, and the key keeps the timeout's marker
 * (`Execution.cutOff`): the handler ran on, and its answer was not seen. So does a handler that answers
 * after a timeout that threw (`hono/timeout`: `c.error` set, `c.res` set in a task that ended before the
 * handler's chain settled) with a `Response` it built itself (not through `c.json`, `c.text`, …), or with
 * nothing. After a hand-written timeout that answers with a helper itself, such an answer cannot be told
 * from the handler's own error: the timeout's 5xx releases the key, as before.
 * @module
 */
import type { Execution } from '../http/execution.js';
import { captureWebResponse } from '../http/web.js';

/**
 * Store `answer`, the handler's answer Hono dropped for `sent`, the status that went out instead (see the
 * module). Resolves once the outcome is handed over; never rejects.
 */
export async function keepDroppedAnswer(
  answer: Response | Promise<Response>,
  sent: number,
  execution: Execution,
): Promise<void> {
  let response: Response;
  try {
    response = await answer;
  } catch {
    // An asynchronous render that failed (the handler's error then follows, and is judged as such): its
    // status is not known, so the key keeps a marker, never run again.
    await execution.cutOff(sent);
    return;
  }
  // Its body already read (by the handler itself): the answer is known by its status only.
  if (response.bodyUsed) {
    await execution.answerLost(response.status, sent);
    return;
  }
  try {
    const captured = await captureWebResponse(response, execution, true);
    // A body still being produced is relayed: no client reads this one, so it is thrown away unread, and
    // the relay reads and stores it itself, stopping past `maxBodyBytes` or once the lease is lost (an
    // event stream that never ends), as for a client that went away.
    await captured.body?.cancel();
  } catch {
    // The outcome is handed over either way (`captureWebResponse`, `Execution.bodyFailed`); nobody is
    // left to tell.
  }
}
