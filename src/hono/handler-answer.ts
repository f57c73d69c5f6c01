/**
 * The answer the Hono handler gave, for when producing it fails after the handler's work is done: `c.json`
 * that cannot serialize what the handler answers with (a BigInt, a circular object, a `toJSON` that
 * throws), or a middleware between the layer and the handler that throws once the handler has returned
 * (after `await next()`). Hono renders that error through onError, a 500 where the handler answered 201;
 * judged by that 500, the key was released and the retry charged a second time. The key is judged by the
 * answer instead (`Execution.answerLost`), as Express's `res.json` and Fastify's serializer are.
 *
 * `c.json(x, 201)` is Hono's `res.status(201).json(x)`: the handler calls it with its answer, so a throw
 * from it counts as an answer lost, not as the handler's own error. A throw from the handler's code before
 * that (its own `JSON.stringify`, `Response.json`, a failed charge) still releases the key.
 * @module
 */
import type { Context } from 'hono';

/** The response helpers of `Context` that build the handler's answer (and may throw while doing so). */
const HELPERS = ['json', 'text', 'body', 'html', 'newResponse'] as const;

type Helper = (...args: unknown[]) => unknown;

/**
 * Watch `c` while the handler runs under the layer. Returns a function that gives, once `next()` has
 * settled, the status of the handler's answer when it was lost (see the module), else `undefined`: the
 * status a helper threw on, even when the handler caught that error and answered something else (as with
 * Express's `res.json`: the work behind the answer is done either way), or the status of the response the
 * handler returned when an error (`c.error`) followed it.
 */
export function watchAnswer(c: Context): () => number | undefined {
  let thrown: number | undefined;
  let answered: number | undefined;
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
      try {
        return helper(...args);
      } catch (error) {
        thrown ??= statusOf(args[1], status);
        throw error;
      }
    };
  }
  // Hono sets `c.res` to what the handler returned, then, if a middleware after the layer throws, to
  // onError's reply (with `c.error` set first): the first set without an error is the handler's answer.
  const accessor = resAccessor(c);
  if (accessor !== undefined) {
    Object.defineProperty(c, 'res', {
      configurable: true,
      enumerable: false,
      get: () => accessor.get!.call(c),
      set: (response: Response | undefined) => {
        if (response !== undefined && c.error === undefined) answered ??= response.status;
        accessor.set!.call(c, response);
      },
    });
  }
  return () => thrown ?? (c.error === undefined ? undefined : answered);
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
