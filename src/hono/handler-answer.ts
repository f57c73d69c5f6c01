/**
 * The answer the Hono handler gave, for when producing it fails after the handler's work is done: `c.json`
 * that cannot serialize what the handler answers with (a BigInt, a circular object, a `toJSON` that
 * throws), a `c.html` whose async render (a promise, JSX) rejects, or a middleware between the layer and
 * the handler that throws once the handler has returned (after `await next()`). Hono renders an `Error`
 * through onError, a 500 where the handler answered 201, and lets anything else thrown (`throw { code }`)
 * out of `next()`; judged by either, the key was released and the retry charged a second time. The key is
 * judged by the answer instead (`Execution.answerLost`), as Express's `res.json` and Fastify's serializer
 * are.
 *
 * `c.json(x, 201)` is Hono's `res.status(201).json(x)`: the handler calls it with its answer, so a throw
 * from it counts as an answer lost, not as the handler's own error. A throw from the handler's code before
 * that (its own `JSON.stringify`, `Response.json`, a failed charge) still releases the key.
 * @module
 */
import { nextTick } from 'node:process';
import type { Context } from 'hono';

/** The response helpers of `Context` that build the handler's answer (and may throw while doing so). */
const HELPERS = ['json', 'text', 'body', 'html', 'newResponse'] as const;

type Helper = (...args: unknown[]) => unknown;

/** What {@link watchAnswer} saw of the handler's answer, read once `next()` has settled. */
export interface HandlerAnswer {
  /**
   * `next()` resolved: the status of the handler's answer when it was lost, else `undefined`. The status
   * a helper failed on, even when the handler caught that error and answered something else (as with
   * Express's `res.json`: the work behind the answer is done either way), or the status of the response
   * the handler returned when an error (`c.error`) followed it.
   */
  lost(): number | undefined;
  /**
   * `next()` rejected (a value that is not an `Error`, which Hono does not hand to onError): the status
   * of the answer the handler had given before, else `undefined` (it threw before answering). No `c.error`
   * to look at here: the rejection itself is the error that followed the answer.
   */
  given(): number | undefined;
  /**
   * `next()` resolved: the answer the handler gave (through a helper) after `c.res` was last set, which
   * therefore never reached `c.res`, else `undefined`. Hono sets what the handler returns on `c.res` only
   * while the context is not finalized: an answer given after something finalized it under the layer's
   * pending `next()` was dropped. That something is a middleware before the layer that answered without
   * waiting for `next()` (a timeout: `hono/timeout`'s 504, any `Promise.race` on `next()`), since what the
   * chain under the layer answers settles before that chain's `next()` does. The handler's work is done,
   * and this is its answer (see `./outer-answer.ts`).
   *
   * Not a helper answer given while the task that made that last set runs (its callback, then the
   * microtasks and `process.nextTick`s it leads to): Hono unwinds the middlewares before the layer then,
   * and one that answers again after its `next()` (`return c.json(…)`, which Hono ignores once the
   * timeout answered) is not the handler, which was waiting for something (I/O, a timer) when the timeout
   * answered and answers from a task of its own, even one due at the very moment of the timeout's. Stored
   * as the handler's, that answer was replayed to every retry (or, a 5xx, released the key) when the
   * handler then answered with a `Response` it built itself, or nothing.
   */
  dropped(): Response | Promise<Response> | undefined;
  /**
   * `next()` resolved: something before the layer answered while the handler ran on (a timeout), and the
   * handler's own answer, if any, was not seen (a `Response` it built itself, or none). Told by `c.res`
   * last set in a task that has ended by now: the chain under the layer sets what the handler returns,
   * or onError's page for its error, in the task that resolves the layer's `next()`. And by what came
   * with that set: an error rendered through onError (`c.error`: `hono/timeout`'s exception), or a
   * middleware before the layer answering again after its `next()` in that set's task (a helper answer
   * Hono ignores, see {@link HandlerAnswer.dropped}). Judged by the timeout's 5xx, the key was released
   * and the retry charged a second time.
   */
  answerUnseen(): boolean;
}

/**
 * Watch `c` while the handler runs under the layer (see the module). `carry`, when given, is applied to
 * the first response set on `c.res` when no helper built it (a `Response` returned as it is), before Hono
 * takes it (`./earlier-response.ts`).
 */
export function watchAnswer(c: Context, carry?: (response: Response) => Response): HandlerAnswer {
  let thrown: number | undefined;
  let answered: number | undefined;
  // The order of the answers given and of the sets of `c.res`: an answer given after the last set was
  // dropped. Compared by order, not by identity: Hono's setter copies a response it merges headers into.
  let order = 0;
  let lastSet = 0;
  // True from a set of `c.res` until the task that made it has run its microtasks: see `dropped`. Not a
  // turn of the event loop, which also holds the timers and I/O callbacks due with the timeout's, the
  // handler's among them.
  let inSetTask = false;
  const setTaskEnded = () => {
    inSetTask = false;
  };
  let lastAnswer: { at: number; inSetTask: boolean; response: unknown } | undefined;
  // What the helpers built, by identity (Hono sets the very object returned): only to know, for `carry`,
  // which responses were built without the context's headers.
  const built = carry === undefined ? undefined : new WeakSet<object>();
  // The status `c.status()` set, which a helper given none answers with.
  let status = 200;
  const setStatus = c.status;
  c.status = (code) => {
    status = code;
    return setStatus(code);
  };
  for (const name of HELPERS) {
    const helper = c[name] as unknown as Helper;
    (c as unknown as Record<string, Helper>)[name] = (...args: unknown[]) => {
      // Read now: the status may change before an async render settles.
      const answering = statusOf(args[1], status);
      let result: unknown;
      try {
        result = helper(...args);
      } catch (error) {
        thrown ??= answering;
        throw error;
      }
      // `c.html` given a promise or JSX renders asynchronously: its failure is a rejection, not a throw.
      if (result instanceof Promise) {
        result = result.then(
          (response: object) => {
            built?.add(response);
            return response;
          },
          (error: unknown) => {
            thrown ??= answering;
            throw error;
          },
        );
      } else if (typeof result === 'object' && result !== null) built?.add(result);
      lastAnswer = { at: ++order, inSetTask, response: result };
      return result;
    };
  }
  // Hono sets `c.res` to what the handler returned, then, if a middleware after the layer throws an
  // `Error`, to onError's reply (with `c.error` set first): the first set without an error is the
  // handler's answer.
  const accessor = resAccessor(c);
  if (accessor !== undefined) {
    Object.defineProperty(c, 'res', {
      configurable: true,
      enumerable: false,
      get: () => accessor.get!.call(c),
      set: (response: Response | undefined) => {
        if (response !== undefined && c.error === undefined) answered ??= response.status;
        // Carried to the first response set only (the answer): not again to what is set after it, such
        // as the layer's own copy of it around the captured body, which has its headers already.
        const set =
          lastSet === 0 && response !== undefined && carry !== undefined && !built?.has(response)
            ? carry(response)
            : response;
        lastSet = ++order;
        // A tick queued now runs once the microtasks this task led to have all run (Node drains them
        // before its tick queue's next round), before any other task: timer, I/O or immediate.
        if (!inSetTask) {
          inSetTask = true;
          nextTick(setTaskEnded);
        }
        accessor.set!.call(c, set);
      },
    });
  }
  return {
    lost: () => thrown ?? (c.error === undefined ? undefined : answered),
    given: () => thrown ?? answered,
    dropped: () =>
      lastSet !== 0 && lastAnswer !== undefined && lastAnswer.at > lastSet && !lastAnswer.inSetTask
        ? (lastAnswer.response as Response | Promise<Response>)
        : undefined,
    // Not a middleware under the layer that answers again after its `next()` (Hono ignores it too): it
    // does so in the task the handler's answer was set in, still running here.
    answerUnseen: () =>
      lastSet !== 0 &&
      !inSetTask &&
      (c.error !== undefined ||
        (lastAnswer !== undefined && lastAnswer.at > lastSet && lastAnswer.inSetTask)),
  };
}

// The status a helper answers with: its second argument (a status, or an init with one), else `c.status`.
function statusOf(arg: unknown, status: number): number {
  if (typeof arg === 'number') return arg;
  const init = arg as { status?: unknown } | undefined;
  return typeof init?.status === 'number' ? init.status : status;
}

// The `res` accessor `c` has now: its own (another layer's watch) or its class's.
function resAccessor(c: Context): PropertyDescriptor | undefined {
  let target: object | null = c;
  while (target !== null) {
    const descriptor = Object.getOwnPropertyDescriptor(target, 'res');
    if (descriptor !== undefined) {
      return descriptor.get !== undefined && descriptor.set !== undefined ? descriptor : undefined;
    }
    target = Object.getPrototypeOf(target);
  }
  return undefined;
}
