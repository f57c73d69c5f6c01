/**
 * `asyncContext: true` on a consumer: its handler runs with `currentIdempotency()` set to its own context
 * (handler-context.ts), through the HTTP layer's AsyncLocalStorage, so that a helper shared with HTTP
 * routes (`publishWithKey()`) carries the message's key as it carries a request's. One code path for every
 * adapter (RabbitMQ, NATS JetStream, Redis Streams).
 * @module
 */
import type { RunContext } from '../core/engine.js';
import { isAsyncContextEnabled, runWithContext } from '../http/context.js';
import { CurrentHandlerContext, HandlerContext } from './handler-context.js';
import type { ConsumerHandler, ResolvedConsumerOptions } from './options.js';

/** The context a delivery's handler receives: one that `currentIdempotency()` can return when asked to. */
export function handlerContext<M>(
  options: ResolvedConsumerOptions<M>,
  key: string,
  deliveryCount: number,
  run: RunContext,
): HandlerContext {
  return options.asyncContext
    ? new CurrentHandlerContext(key, deliveryCount, run, options.scope)
    : new HandlerContext(key, deliveryCount, run);
}

/**
 * Call `handler`, with `currentIdempotency()` set to `context` in its call tree (`asyncContext: true`),
 * and to nothing without the option once any adapter turned AsyncLocalStorage on: a consumer started
 * under an HTTP request (its connection opened, its loop begun by a request handler) would otherwise hand
 * its handlers that request's context, and a shared helper would publish with the request's key. Only
 * the handler's call: the completion, the ack and the hooks after it never see the handler's context.
 *
 * While no adapter or consumer of the process turned the option on (no promise hooks installed either),
 * a plain call: no closure, no allocation, the consumer's hot path as it was.
 */
export function callHandler<M>(
  handler: ConsumerHandler<M>,
  message: M,
  context: HandlerContext,
): unknown {
  if (!isAsyncContextEnabled()) return handler(message, context);
  const current = context instanceof CurrentHandlerContext ? context : undefined;
  return runWithContext(current, () => handler(message, context));
}
