/**
 * Consumer hooks that annotate the active span of a delivery (the one your messaging instrumentation
 * made active, or your own) with what the idempotent consumer decided, and add events for dead letters
 * and failed broker operations. The engine's hooks (`openTelemetryHooks`) annotate the same span with the
 * run behind the decision.
 * @module
 */
import { type Attributes, type Span, trace } from '@opentelemetry/api';
import type { ConsumerEvent, ConsumerHooks } from '../consumer/options.js';
import { ConsumerAttribute, IdempotencyEvent } from './attributes.js';
import { errorAttributes, recording } from './span-writes.js';

/** Options of {@link openTelemetryConsumerHooks}. */
export interface OpenTelemetryConsumerHooksOptions {
  /** The span to annotate for a delivery. @default the active span (`trace.getActiveSpan()`) */
  spanOf?: (event: ConsumerEvent<unknown>) => Span | undefined;
}

/**
 * Hooks that set `idempotency.consumer.*` attributes (the decision, its reason, the delivery count) on
 * the active span of each delivery, and add `idempotency.dead_letter` and `idempotency.broker_error`
 * events. Pass them as a consumer's `hooks`, alone or with others through `combineHooks`.
 *
 * @param options.spanOf which span to annotate (default: the active span)
 * @see docs/observability.md
 * @example
 * import { idempotentConsumer } from 'idempotency-kit/amqp';
 * import { openTelemetryConsumerHooks, openTelemetryHooks } from 'idempotency-kit/opentelemetry';
 *
 * await idempotentConsumer(channel, ship, {
 *   queue: 'orders',
 *   name: 'shipping',
 *   idempotency: { store, hooks: openTelemetryHooks() },
 *   hooks: openTelemetryConsumerHooks(),
 * });
 */
export function openTelemetryConsumerHooks<M = unknown>(
  options: OpenTelemetryConsumerHooksOptions = {},
): ConsumerHooks<M> {
  const spanOf = options.spanOf ?? (() => trace.getActiveSpan());
  /** Annotate the delivery's span, if it records, with the consumer, the decision and `extra`. */
  const annotateDelivery = (
    event: ConsumerEvent<M>,
    decision: string | undefined,
    reason: string | undefined,
    extra: Attributes = {},
  ) => {
    const span = recording(spanOf(event));
    span?.setAttributes({
      [ConsumerAttribute.Name]: event.consumer,
      [ConsumerAttribute.DeliveryCount]: event.deliveryCount,
      ...(decision === undefined ? {} : { [ConsumerAttribute.Decision]: decision }),
      ...(reason === undefined ? {} : { [ConsumerAttribute.Reason]: reason }),
      ...extra,
    });
    return span;
  };

  return {
    onExecuted(event) {
      annotateDelivery(event, 'ack', 'executed');
    },
    onDuplicate(event) {
      annotateDelivery(event, 'ack', 'duplicate');
    },
    onRetry(event) {
      annotateDelivery(event, 'retry', event.reason, {
        [ConsumerAttribute.RetryDelayMs]: event.delayMs,
      });
    },
    onDeadLetter(event) {
      annotateDelivery(event, 'dead_letter', event.reason)?.addEvent(IdempotencyEvent.DeadLetter, {
        [ConsumerAttribute.Reason]: event.reason,
        ...errorAttributes(event.error),
      });
    },
    onBrokerError(event) {
      annotateDelivery(event, undefined, undefined)?.addEvent(IdempotencyEvent.BrokerError, {
        [ConsumerAttribute.Operation]: event.operation,
        ...errorAttributes(event.error),
      });
    },
  };
}
