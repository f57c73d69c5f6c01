/**
 * Whether Fastify began its error handling for a reply, read from Fastify's own state rather than from
 * the plugin's `onError` hook: Fastify stops at the first `onError` hook that fails, so an app's hook
 * registered before the plugin's can keep it from ever seeing the error, while Fastify goes on to the error
 * handler all the same (`lib/reply.js` `onErrorHook`, `lib/error-handler.js` `handleError`).
 *
 * `handleError` sets the reply's `kReplyNextErrorHandler` (the handler to use should this one fail, or
 * `false` for the last resort) before it calls the error handler, and nothing resets it: once it differs
 * from its value when the handler started, every send is Fastify's error handling. Fastify's symbols are
 * not exported, so they are found by description (`./reply-symbols.ts`).
 * @module
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { IS_ERROR, isLaidOut, ownSymbol } from './reply-symbols.js';

// `kReplyNextErrorHandler`: absent until `handleError` first runs for the reply (Fastify 5.x).
const NEXT_ERROR_HANDLER = 'fastify.reply.nextErrorHandler';

// `kReplyIsError` (`IS_ERROR`) is set by the constructor of every reply of the Fastify versions whose
// `handleError` sets the one above (the same `lib/symbols.js`): without it the layout is not the one
// checked, and the absence of `kReplyNextErrorHandler` proves nothing. Only this one: an app that decorates
// the reply (`decorateReply`, which most plugins do: cookies, sensible, view, jwt) gets replies from another
// constructor, which sets no `kReplyIsRunningOnErrorHook` until an error comes; requiring that one too
// turned the drops off in such apps, and their fallback released a key whose handler had charged.

// `kReplyIsRunningOnErrorHook`: absent on a decorated app's reply until its first error (false then).
const RUNNING_ON_ERROR_HOOK = 'fastify.reply.isRunningOnErrorHook';

/** Fastify's error-handling state could not be read (another Fastify version): assume it began. */
export const UNREADABLE: unique symbol = Symbol(
  'idempotency-kit.fastify-error-handling-unreadable',
);

// Set once a reply showed that the state does not change as checked (`disprove`): unreadable from then on.
let disproved = false;

/**
 * Note that Fastify's error handling sent a reply while the state read the same as when the handler
 * started (a Fastify that kept the symbols checked, but no longer sets `kReplyNextErrorHandler`): the state
 * is unreadable for the rest of the process, and nothing is dropped. Once only: a false alarm (a second
 * answer sent while an async `onError` hook awaits) costs no more than the drops it turns off.
 */
export function disprove(): void {
  disproved = true;
}

/**
 * The reply's `kReplyNextErrorHandler` (`undefined` while Fastify has not begun its error handling), or
 * {@link UNREADABLE} when the reply does not have the layout this was checked against.
 */
export function errorHandlingState(reply: FastifyReply): unknown {
  if (disproved || !isLaidOut(reply)) return UNREADABLE;
  const symbol = ownSymbol(reply, NEXT_ERROR_HANDLER);
  return symbol === undefined ? undefined : fieldOf(reply, symbol);
}

/**
 * Whether Fastify is running the `onError` hooks (`kReplyIsRunningOnErrorHook`): it has not called the
 * error handler yet, and refuses a send meanwhile (`FST_ERR_SEND_INSIDE_ONERR`).
 */
export function inOnErrorHooks(reply: FastifyReply): boolean {
  const symbol = ownSymbol(reply, RUNNING_ON_ERROR_HOOK);
  return symbol !== undefined && fieldOf(reply, symbol) === true;
}

/**
 * Clear the mark Fastify sets on a reply before it sends an error (`kReplyIsError`), for a send the plugin
 * dropped: left set, the mark would turn the next send (an error page, should the answer fail later in
 * `onSend`) into an error of its own.
 */
export function clearErrorMark(reply: FastifyReply): void {
  const symbol = ownSymbol(reply, IS_ERROR);
  if (symbol !== undefined) (reply as unknown as Record<symbol, unknown>)[symbol] = false;
}

const fieldOf = (reply: FastifyReply, symbol: symbol): unknown =>
  (reply as unknown as Record<symbol, unknown>)[symbol];

/**
 * Whether Fastify began its error handling since `start` (the {@link errorHandlingState} when the handler
 * started), or `undefined` when its state cannot be read (another Fastify version).
 */
export function errorHandlingBegan(reply: FastifyReply, start: unknown): boolean | undefined {
  if (start === UNREADABLE) return undefined;
  const now = errorHandlingState(reply);
  return now === UNREADABLE ? undefined : now !== start;
}

/**
 * Whether `error` is the one Fastify answers when a route's `handlerTimeout` passes (by its code: the
 * option, and the error's class, are recent in Fastify 5).
 */
export function isHandlerTimeout(error: unknown): boolean {
  return (
    typeof error === 'object' &&
    error !== null &&
    (error as { code?: unknown }).code === 'FST_ERR_HANDLER_TIMEOUT'
  );
}

/**
 * The `handlerTimeout` error that aborted the request's signal, if one did: Fastify aborts it with that
 * error before it answers. Read only once Fastify's error handling began unseen by the plugin (the
 * signal's getter makes a controller for a request that had none).
 */
export function handlerTimeoutOf(request: FastifyRequest): unknown {
  const reason = (request as { signal?: AbortSignal }).signal?.reason as unknown;
  return isHandlerTimeout(reason) ? reason : undefined;
}
