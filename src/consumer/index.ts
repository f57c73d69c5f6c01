/**
 * Internal module shared by the broker adapters (`amqp`, `nats`, `redis-streams`): key extraction and
 * scoping, the decision policy, the runner that carries decisions out, flow control and draining. Not a
 * public subpath; adapters re-export the types users need.
 * @module
 */

export {
  describeError,
  MAX_ERROR_MESSAGE_LENGTH,
  MAX_ERROR_NAME_LENGTH,
  truncateText,
} from '../core/describe-error.js';
// `currentIdempotency()` for the consumers' `asyncContext: true`: the one AsyncLocalStorage the HTTP
// adapters set too, so a helper shared by a route and a consumer reads either's context.
export type { IdempotencyContext } from '../http/context.js';
export { currentIdempotency } from '../http/context.js';
export type { Backoff, BackoffOptions } from './backoff.js';
export { createBackoff } from './backoff.js';
export type { AttemptResult, Decision, DecisionPolicy } from './decision.js';
export { DeadLetterReason, decide, RetryReason } from './decision.js';
export { handedBackScope, recordHandedBack } from './handed-back.js';
export { InFlight, settlesWithin, sleep } from './in-flight.js';
export type {
  ConsumerContext,
  ConsumerErrorEvent,
  ConsumerEvent,
  ConsumerHandler,
  ConsumerHooks,
  ConsumerOptions,
  KeyExtractor,
  ResolvedConsumerOptions,
} from './options.js';
export { consumerScope, resolveConsumerOptions } from './options.js';
export type { DeadLetter, Delivery } from './process.js';
export { NOT_WRITTEN, processDelivery } from './process.js';
