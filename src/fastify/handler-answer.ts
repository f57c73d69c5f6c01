/**
 * Where a Fastify request under a claim stands: whether its handler was called, whether it failed, and
 * whether its answer had entered Fastify's send pipeline before an error came.
 *
 * An error that reaches `onError` after the handler answered (a response schema that cannot serialize
 * the handler's object, `JSON.stringify` on a BigInt, a `preSerialization` hook, an `onSend` hook
 * registered before the plugin) is not the handler failing: its effect (the charge) happened, only its
 * response was lost. Fastify answers both with the same 500 through the same error handler, so the plugin
 * tells them apart here, by what came first: `reply.send` with the handler's answer, or the handler's
 * throw. Released like a thrown error, such a key let a retry charge a second time.
 * @module
 */
import type { FastifyReply, FastifyRequest, RouteHandlerMethod } from 'fastify';
import { isThenable } from '../core/thenable.js';
import type { Execution } from '../http/index.js';

/** One request's execution under a claim, and what the plugin saw of its handler. */
export interface Running {
  /** The execution the capture settles. */
  execution: Execution;
  /** The error `onError` saw (the handler's, a hook's, a serializer's). */
  error?: unknown;
  /** The route's handler was called: a reply before it came from a hook that runs after the claim. */
  started?: boolean;
  /** The handler threw, or its promise rejected: what Fastify sends next is that error's reply. */
  threw?: boolean;
  /**
   * The status of the handler's answer, once it went into `reply.send` before any error: the handler
   * did its work.
   */
  answered?: number;
  /** `reply.send` was called once the handler had started (its answer, or an error's reply). */
  replied?: boolean;
}

/**
 * Watch `reply.send` for the rest of the request (an own property in place of the prototype's, which
 * Fastify's own calls reach too: a returned value, a thrown error, the error handler's reply). A send
 * before the handler was called is a hook's reply, reported to `onHookAnswer` at once, so that the
 * handler is not run: an async `onSend` registered before the plugin delays the capture, and Fastify goes
 * on to the handler meanwhile when the hook did not `return reply`.
 */
export function watchSends(
  reply: FastifyReply,
  running: Running,
  onHookAnswer: (request: FastifyRequest) => void,
): void {
  const send = reply.send;
  reply.send = function trackedSend(this: FastifyReply, payload?: unknown) {
    if (running.started !== true) onHookAnswer(this.request);
    else {
      running.replied = true;
      if (running.error === undefined && running.threw !== true && !(payload instanceof Error)) {
        running.answered = this.statusCode;
      }
    }
    return send.call(this, payload);
  } as FastifyReply['send'];
}

/**
 * Call `handler`, noting in `running` that it started and whether it threw or rejected. A rejection is
 * seen before Fastify's own reaction to it (which sends the thrown value, an `Error` or not), as ours comes
 * first. Returns what the handler returns, except for a promise: that of its value, or of the reply when
 * the handler called `reply.send` before it resolved.
 *
 * Why the reply: Fastify sends what an async handler's promise resolves with (`undefined` too) unless the
 * reply has ended by then (`reply.sent`). Without the plugin, a handler that calls `reply.send(x)` and
 * returns nothing has its reply ended at once; under the plugin its end is held until the outcome is
 * stored, so Fastify sent `undefined` as a second answer, which went out before the first: the client got
 * an empty body while `x` was stored and replayed to its retry. Resolving with the reply is what Fastify
 * asks of such handlers (`return reply`): it waits for the reply to end, and the handler's answer is the
 * one sent (a value returned beside it is dropped, as Fastify drops the second of two answers).
 */
export function callWatched(
  handler: RouteHandlerMethod,
  self: ThisParameterType<RouteHandlerMethod>,
  request: FastifyRequest,
  reply: FastifyReply,
  running: Running,
): ReturnType<RouteHandlerMethod> {
  running.started = true;
  let result: ReturnType<RouteHandlerMethod>;
  try {
    result = handler.call(self, request, reply);
  } catch (error) {
    running.threw = true;
    throw error;
  }
  // Not the reply a handler returns after `reply.send` (`(request, reply) => reply.send(x)`): a thenable
  // too, whose `then` calls its first callback once the response ended, and which never rejects with the
  // handler's error.
  if (result === reply || !isThenable(result)) return result;
  return Promise.resolve(result).then(
    (value) => (running.replied === true ? reply : value),
    (error: unknown) => {
      running.threw = true;
      throw error;
    },
  ) as ReturnType<RouteHandlerMethod>;
}

/**
 * The status of the handler's answer when an error came after it was on its way (its effect happened,
 * its response is lost: `Execution.answerLost`), else `undefined`.
 */
export const lostAnswer = (running: Running): number | undefined =>
  running.error === undefined ? undefined : running.answered;
