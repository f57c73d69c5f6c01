/**
 * Consumer hooks that annotate the active span of a delivery (the one your messaging instrumentation
 * made active, or your own) with what the idempotent consumer decided, and add events for dead letters
 * and failed broker operations. The engine's hooks (`openTelemetryHooks`) annotate the same span with the
 * run behind the decision. A failure of the consumer as a whole gets a span of its own.
 * @module
 */
import { type Attributes, type Span, SpanStatusCode, trace } from '@opentelemetry/api';
import type { ConsumerErrorEvent, ConsumerEvent, ConsumerHooks } from '../consumer/options.js';
import { knownFields } from '../core/option-checks.js';
import { ConsumerAttribute, IdempotencyEvent, IdempotencySpan } from './attributes.js';
import { errorAttributes, recording } from './span-writes.js';

// The instrumentation scope of the one span these hooks start (the package's name, as OpenTelemetry asks).
const TRACER_NAME = 'idempotency-kit';

/** Options of {@link openTelemetryConsumerHooks}. */
export interface OpenTelemetryConsumerHooksOptions {
  /** The span to annotate for a delivery. @default the active span (`trace.getActiveSpan()`) */
  spanOf?: (event: ConsumerEvent<unknown>) => Span | undefined;
}

/**
 * Record a failure of the consumer as a whole as a span of its own: a root span (the failure belongs to
 * no delivery, and the context it is reported in is the one the consumer was started in, whose span has
 * usually ended long before) with status `ERROR` and the error as an `exception` event, so that it shows
 * in the trace backend's error views. An event on "the active span", as the delivery hooks write, would
 * almost never be seen: no delivery's span is active in the consumer's loop.
 */
function recordConsumerError(event: ConsumerErrorEvent): void {
  const span = trace.getTracer(TRACER_NAME).startSpan(IdempotencySpan.ConsumerError, {
    root: true,
    attributes: {
      [ConsumerAttribute.Name]: event.consumer,
      [ConsumerAttribute.Operation]: event.operation,
    },
  });
  // Without an SDK (or when sampled out) the span does not record: build nothing more.
  if (span.isRecording()) {
    const error = errorAttributes(event.error);
    span.addEvent('exception', error);
    span.setStatus({ code: SpanStatusCode.ERROR, message: String(error['exception.message']) });
  }
  span.end();
}

// Every key of OpenTelemetryConsumerHooksOptions, checked by the compiler both ways: a misspelt option is refused instead of
// leaving its default in force.
const OPEN_TELEMETRY_CONSUMER_HOOKS_FIELDS = Object.keys({
  spanOf: true,
} as const satisfies Record<keyof OpenTelemetryConsumerHooksOptions, true>);

/**
 * Hooks that set `idempotency.consumer.*` attributes (the decision, its reason, the delivery count) on
 * the active span of each delivery, and add `idempotency.dead_letter` and `idempotency.broker_error`
 * events. A failure of the consumer as a whole (`onConsumerError`: its JetStream consumer deleted, its
 * connection closed, a Redis Streams group gone) starts an `idempotency.consumer_error` span with status
 * `ERROR`. Pass them as a consumer's `hooks`, alone or with others through `combineHooks`.
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
  knownFields(options, 'openTelemetryConsumerHooks', OPEN_TELEMETRY_CONSUMER_HOOKS_FIELDS);
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
    onConsumerError: recordConsumerError,
  };
}
