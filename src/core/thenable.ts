/**
 * Telling a promise-like value from a plain one, for code that stays synchronous when it can.
 * @module
 */

/** True when `value` has a callable `then` (a promise or any thenable). */
export const isThenable = (value: unknown): value is PromiseLike<unknown> =>
  typeof (value as PromiseLike<unknown> | null | undefined)?.then === 'function';
