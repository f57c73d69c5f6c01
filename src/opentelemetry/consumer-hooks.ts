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
import { errorAttributes } from './error-attributes.js';

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
  const annotate = (
    event: ConsumerEvent<M>,
    decision: string | undefined,
    reason: string | undefined,
    extra: Attributes = {},
  ): Span | undefined => {
    const span = spanOf(event);
    if (span === undefined || !span.isRecording()) return undefined;
    span.setAttributes({
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
      annotate(event, 'ack', 'executed');
    },
    onDuplicate(event) {
      annotate(event, 'ack', 'duplicate');
    },
    onRetry(event) {
      annotate(event, 'retry', event.reason, { [ConsumerAttribute.RetryDelayMs]: event.delayMs });
    },
    onDeadLetter(event) {
      annotate(event, 'dead_letter', event.reason)?.addEvent(IdempotencyEvent.DeadLetter, {
        [ConsumerAttribute.Reason]: event.reason,
        'exception.type': event.error.name,
        'exception.message': event.error.message,
      });
    },
    onBrokerError(event) {
      annotate(event, undefined, undefined)?.addEvent(IdempotencyEvent.BrokerError, {
        [ConsumerAttribute.Operation]: event.operation,
        ...errorAttributes(event.error),
      });
    },
  };
}
