/**
 * The execution of a request whose `handlerTimeout` passed while its handler ran on: from then on, nothing
 * releases its key.
 *
 * An answer of the handler's that goes out before the timeout's page (an async error handler still at
 * work on it) is the key's outcome (`./handler-answer.ts`). The plugin tells that answer from the page by
 * the reply it is sent on, as Fastify's error handling for the timeout gets a stand-in for the reply; an
 * error handler that sends its page through another reference to the reply (one a request-context helper
 * kept from `onRequest`) cannot be told from the handler. Its 503 was then judged as the handler's answer:
 * it released the key while the handler ran on, and the retry charged a second time. The handler may send
 * a 5xx of its own before its work is done as well (`reply.code(502).send()`, then on). So an answer
 * that would release the key (a 5xx, a thrown error's reply, a failure) keeps the timeout's marker
 * instead: every retry is answered `response_not_captured`, never run again. So does a 5xx under
 * `storeServerErrors: true`: stored, the page was replayed to every retry as the handler's outcome (a 503
 * "try again later" while the handler had charged), where the marker tells the outcome is unknown. An
 * answer that is stored (2xx–4xx) is stored as before.
 * @module
 */
import type { Execution } from '../http/index.js';

/**
 * Whether a status, once the timeout passed, cannot be the handler's known outcome: a 5xx (whatever
 * `storeServerErrors` says: a page sent through another reference to the reply is one too), or a final
 * status below 200, which the policy never stores.
 */
const unknownOutcome = (status: number): boolean => status >= 500 || status < 200;

/**
 * `execution`, except that what would release its key, or store a 5xx, keeps the timeout's marker
 * (`cutOff`) instead. `statusOf` reads the reply's status, for the marker of a failure that comes without
 * a response.
 */
export function keptAfterTimeout(execution: Execution, statusOf: () => number): Execution {
  const { policy } = execution;
  return {
    get context() {
      return execution.context;
    },
    policy,
    enter: (fn) => execution.enter(fn),
    finish: (response) =>
      unknownOutcome(response.status)
        ? execution.cutOff(response.status)
        : execution.finish(response),
    // Stored only when the policy keeps errors' responses, as `fail` does, and never a 5xx.
    fail: (error, response) =>
      policy.storeServerErrors && response !== undefined && !unknownOutcome(response.status)
        ? execution.fail(error, response)
        : execution.cutOff(response?.status ?? statusOf()),
    uncaptured: (status) =>
      unknownOutcome(status) ? execution.cutOff(status) : execution.uncaptured(status),
    cutOff: (status) => execution.cutOff(status),
    answerLost: (answered, sent) =>
      unknownOutcome(answered) ? execution.cutOff(sent) : execution.answerLost(answered, sent),
    bodyFailed: (status, error) =>
      unknownOutcome(status) ? execution.cutOff(status) : execution.bodyFailed(status, error),
  };
}
