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
import { keptAfterTimeout } from './after-timeout.js';
import type { AnswerHead } from './answer-head.js';
import {
  clearErrorMark,
  disprove,
  errorHandlingBegan,
  errorHandlingState,
  handlerTimeoutOf,
  inOnErrorHooks,
  isHandlerTimeout,
} from './error-handling.js';

/** One request's execution under a claim, and what the plugin saw of its handler. */
export interface Running {
  /**
   * The execution the capture settles; once the `handlerTimeout` passed, one that never releases the key
   * (`./after-timeout.ts`).
   */
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
  /**
   * `reply.send` was called once the handler had started (its answer, or an error's reply), other than
   * by Fastify's error handling for the `handlerTimeout`.
   */
  replied?: boolean;
  /** The head the capture stored the handler's answer with, which the response must go out with. */
  captured?: AnswerHead;
  /**
   * Fastify's error-handling state of the reply when the handler started (`./error-handling.ts`): a send
   * once it changed is Fastify's error handling, never dropped.
   */
  errorHandling?: unknown;
  /**
   * Fastify's error-handling state when the `handlerTimeout` reply reached the capture, which holds it
   * while the marker is written: a send while the state stays the same is the handler's late answer
   * (`lateAnswer`), not Fastify's error handling.
   */
  timedOut?: { errorHandling: unknown };
  /**
   * The stand-in for the reply (a `Proxy` forwarding everything to it) that Fastify's error handling for
   * the `handlerTimeout` runs on, from the send that starts it: each send through it is that handling's
   * (the `onError` hooks, the error handler and the value it resolves with get the stand-in), and a send
   * on the reply itself is the handler's. Both share the reply's state; only their sends are told apart.
   */
  timeoutReply?: FastifyReply;
  /**
   * The handler answered (a send, a returned value or a throw) after the `handlerTimeout`, before the
   * timeout's reply was sent: its answer goes out and is the key's outcome, and the timeout's reply, sent
   * later, is dropped (`overtakes`).
   */
  overtaken?: boolean;
  /**
   * Fastify's error handling for the `handlerTimeout` sent its reply on through the stand-in (the error
   * handler's page, or an error for the next error handler, whose page follows at once): that reply is
   * on its way, through `preSerialization` and `onSend` hooks that may await before the capture, and an
   * answer of the handler's sent meanwhile comes after it (`pagedAnswer`).
   */
  paged?: boolean;
}

/**
 * Noted as the error when Fastify's error handling began without the plugin's `onError` hook seeing it
 * (an app's `onError` hook registered before it failed, and Fastify skipped the rest): what goes out is
 * an error's reply, judged as one (after the handler's answer, by that answer).
 */
const unseenError = () =>
  new Error(
    "Fastify answered an error the plugin's onError hook never saw (an onError hook before it failed)",
  );

/**
 * Watch `reply.send` for the rest of the request (an own property in place of the prototype's, which
 * Fastify's own calls reach too: a returned value, a thrown error, the error handler's reply). A send
 * before the handler was called is a hook's reply, reported to `onHookAnswer` at once, so that the
 * handler is not run: an async `onSend` registered before the plugin delays the capture, and Fastify goes
 * on to the handler meanwhile when the hook did not `return reply`. A send after the handler's answer,
 * before anything failed, is dropped (`secondAnswer`). Fastify's error handling for a `handlerTimeout`
 * runs on a stand-in for the reply (`Running.timeoutReply`), which tells its sends from the handler's.
 */
export function watchSends(
  reply: FastifyReply,
  running: Running,
  onHookAnswer: (request: FastifyRequest) => void,
): void {
  const send = reply.send;
  reply.send = function trackedSend(this: FastifyReply, payload?: unknown) {
    if (running.started !== true) {
      onHookAnswer(this.request);
      return send.call(this, payload);
    }
    const ofTimeout = running.timeoutReply !== undefined && this === running.timeoutReply;
    if (
      ofTimeout
        ? (running.overtaken === true && !this.sent) || lateAnswer(this, running)
        : lateAnswer(this, running) || pagedAnswer(this, running) || secondAnswer(this, running)
    ) {
      dropSecondAnswer(this, running, payload);
      return this;
    }
    const { execution, replied, answered, overtaken, error, errorHandling, timeoutReply, paged } =
      running;
    if (ofTimeout) running.paged = true;
    if (!ofTimeout && overtakes(this, running)) {
      // The handler's answer is the outcome, as without the plugin, where it goes out and the timeout's
      // reply is dropped: a throw is judged as one (by the status of Fastify's reply to it), and Fastify's
      // error handling from now on is told by its state changing again.
      running.overtaken = true;
      running.error = running.threw === true || payload instanceof Error ? payload : undefined;
      running.errorHandling = errorHandlingState(this);
    } else {
      checkErrorHandling(this, running, payload);
    }
    // Fastify's `handlerTimeout` reply (its first send, and those of its error handling) is not noted as
    // replied: the value the handler resolves with after it is its answer, which Fastify then sends
    // (`callWatched`), and which goes out should it overtake that reply.
    // Told by the error Fastify sends, not by a code alone: a handler may answer with an object of that
    // code (an upstream's page passed on), which is its answer, not run on the stand-in.
    const startsTimeout =
      !ofTimeout &&
      running.timeoutReply === undefined &&
      payload instanceof Error &&
      isHandlerTimeout(payload);
    if (!ofTimeout && !startsTimeout) running.replied = true;
    if (running.error === undefined && running.threw !== true && !(payload instanceof Error)) {
      running.answered = this.statusCode;
    }
    // Fastify's error handling for the timeout runs on a stand-in for the reply, from the send that
    // starts it (`onError` hooks, the error handler, the value it resolves with): a send of the handler's
    // on the reply itself is then told from it, whatever comes first (an async error handler answers
    // later than the handler may). From the timeout on, nothing releases the key (`./after-timeout.ts`):
    // an answer that would (a 5xx, also a page the error handler sent through another reference to the
    // reply, which is taken for the handler's) keeps the timeout's marker while the handler may run on.
    let self = this;
    if (startsTimeout) {
      self = new Proxy(this, {});
      running.timeoutReply = self;
      running.execution = keptAfterTimeout(running.execution, () => this.statusCode);
    }
    try {
      return send.call(self, payload);
    } catch (thrown) {
      // `reply.send` threw before anything entered Fastify's pipeline (a custom `reply.serializer()`
      // failing on a string, a send inside `onError`): nothing was answered. Noted as an answer, the
      // handler's error that follows (rethrown, or Fastify's reply to it) was dropped as coming after
      // it, and the client got no response. Set before the call rather than after, as an error page
      // Fastify sends from within it (a serializer failing on the answer) must see the answer.
      Object.assign(running, {
        execution,
        replied,
        answered,
        overtaken,
        error,
        errorHandling,
        timeoutReply,
        paged,
      });
      throw thrown;
    }
  } as FastifyReply['send'];
}

/**
 * Note an error Fastify began to handle without the plugin's `onError` hook seeing it, and check that its
 * state reads as expected (`disprove` when it does not).
 */
function checkErrorHandling(reply: FastifyReply, running: Running, payload: unknown): void {
  const began = errorHandlingBegan(reply, running.errorHandling);
  // A `handlerTimeout` is told by the signal it aborted: released as an ordinary 5xx, the key let a
  // retry run the handler beside the one still running (a second charge). Not once the handler's answer
  // overtook it: what is handled then came after that answer.
  if (running.error === undefined && began === true) {
    running.error =
      (running.overtaken === true ? undefined : handlerTimeoutOf(reply.request)) ?? unseenError();
  }
  // The plugin's `onError` saw an error, the hooks are done, and Fastify went on to its error handler,
  // which sends this page: its state should have changed by now.
  if (
    running.error !== undefined &&
    began === false &&
    !(payload instanceof Error) &&
    !inOnErrorHooks(reply)
  ) {
    disprove();
  }
}

/**
 * Whether a send on the reply itself (not Fastify's error handling for the timeout, which runs on
 * `timeoutReply`) is the handler's answer coming after the `handlerTimeout` and before the timeout's reply
 * was sent: an async error handler still at work on it. Without the plugin that answer goes out, and the
 * timeout's reply, sent later, is dropped; kept as the timeout's marker, the client had the handler's 201
 * while every retry was told 409 `response_not_captured`. (While `onError` hooks await, Fastify refuses
 * any send, `FST_ERR_SEND_INSIDE_ONERR`.)
 */
const overtakes = (reply: FastifyReply, running: Running): boolean =>
  running.timeoutReply !== undefined &&
  running.timedOut === undefined &&
  running.overtaken !== true &&
  running.answered === undefined &&
  !reply.sent;

/**
 * Whether a send comes while the handler's answer is on its way and nothing failed since: a second
 * `reply.send`, a value returned beside it, or the handler's throw after it. Without the plugin the reply
 * of such an answer has ended by then, and Fastify drops the newcomer (`FST_ERR_REP_ALREADY_SENT`); the
 * plugin holds the end until the outcome is stored, so Fastify sent the newcomer too, and it went out
 * first: the client got the second answer (or the error's 500) while the first was stored and replayed.
 * Once an error reached `onError` (a serializer, an `onSend` hook, the capture failing on the answer),
 * or Fastify began its error handling without the plugin's `onError` seeing it (`./error-handling.ts`),
 * every send is Fastify's error handling, its page included, and goes through: dropped, the client got
 * no response, and the key stayed in progress while the connection lived.
 */
const secondAnswer = (reply: FastifyReply, running: Running): boolean =>
  running.answered !== undefined &&
  running.error === undefined &&
  !reply.sent &&
  // Unreadable (another Fastify version), the send goes through, as before any was dropped: a second
  // answer may then go out, where a dropped error page left the client without a response.
  errorHandlingBegan(reply, running.errorHandling) === false;

/**
 * Whether a send is the handler's answer coming after Fastify's `handlerTimeout` reply, while the capture
 * holds that reply until its marker is written: a `reply.send`, the value its promise resolves with, or its
 * throw. Without the plugin the timeout's reply has ended by then, and Fastify drops the latecomer; the
 * plugin held it, so Fastify sent the handler's answer too, and it went out first: the client got the
 * handler's 201 while the key kept the timeout's marker (every retry 409 `response_not_captured`). A send
 * of Fastify's error handling after it (an `onSend` hook failing on the timeout's reply) changes the state
 * first, and goes through.
 */
const lateAnswer = (reply: FastifyReply, running: Running): boolean =>
  running.timedOut !== undefined &&
  !reply.sent &&
  errorHandlingState(reply) === running.timedOut.errorHandling;

/**
 * Whether a send on the reply itself is the handler's answer coming after the timeout's reply was sent on
 * (`Running.paged`), while that reply is in hooks that await before the capture (an async `onSend` hook
 * registered before the plugin, an async `preSerialization` hook). Taken for an answer overtaking it, the
 * timeout's reply reached the capture first and was stored as the handler's answer, with its status: a
 * 503 released the key while the handler ran on, and the retry charged again; and the handler's answer,
 * which Fastify sent after it, failed on the head already written (`ERR_HTTP_HEADERS_SENT`). Dropped as
 * Fastify drops a send after the reply ended.
 */
const pagedAnswer = (reply: FastifyReply, running: Running): boolean =>
  running.paged === true && !reply.sent;

/**
 * Drop what came after the handler's answer, as Fastify does once a reply has ended, with its log line.
 * Fastify marked the reply before it sent an error (a thrown value, which need not be an `Error`; its
 * `handlerTimeout`): the mark is cleared with it.
 */
function dropSecondAnswer(reply: FastifyReply, running: Running, payload: unknown): void {
  clearErrorMark(reply);
  if (running.threw === true || payload instanceof Error) {
    reply.log.error({ err: payload }, 'An error came after the reply was sent; dropped');
    return;
  }
  const { url, method } = reply.request;
  reply.log.warn({ err: alreadySent(url, method) });
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
  running.errorHandling = errorHandlingState(reply);
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

/**
 * The warning plain Fastify logs for a send after the reply ended (`FST_ERR_REP_ALREADY_SENT`), made here:
 * this subpath imports nothing from `fastify` at run time (only its types), so it loads where the app's
 * Fastify is not resolvable from this package (`fastify` is an optional peer).
 */
function alreadySent(url: string, method: string): Error {
  const error = new Error(
    `Reply was already sent, did you forget to "return reply" in "${url}" (${method})?`,
  );
  return Object.assign(error, { code: 'FST_ERR_REP_ALREADY_SENT', statusCode: 500 });
}
