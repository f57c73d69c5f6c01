/**
 * Consumer hooks that count every delivery's decision in Prometheus metrics: what an idempotent consumer
 * did with each message (acked as executed or duplicate, redelivered later and why, dead-lettered and
 * why) and the broker operations that failed. The engine's own metrics (`prometheusHooks`) count the runs
 * behind those decisions.
 * @module
 */
import { type Counter, type Registry, register } from 'prom-client';
import type { DeadLetterReason, RetryReason } from '../consumer/decision.js';
import type { ConsumerHooks } from '../consumer/options.js';
import { knownFields } from '../core/option-checks.js';
import { counterIn, metricPrefix } from './metrics.js';

/** Options of {@link prometheusConsumerHooks}. */
export interface PrometheusConsumerHooksOptions {
  /** Where the metrics are registered. @default prom-client's global `register` */
  registry?: Registry;
  /** Prepended to every metric name. @default 'idempotency_' */
  prefix?: string;
}

/** The consumer metrics {@link prometheusConsumerHooks} updates. */
export interface ConsumerMetrics {
  /** `<prefix>consumer_messages_total{consumer, decision, reason}`: every delivery, by decision. */
  messages: Counter<'consumer' | 'decision' | 'reason'>;
  /** `<prefix>consumer_broker_errors_total{consumer, operation}`: failed acks, redeliveries, publishes. */
  brokerErrors: Counter<'consumer' | 'operation'>;
}

/** The hooks, and the metrics they update. `M` is the broker's message type (the hooks never read it). */
export interface PrometheusConsumerHooks<M = unknown> extends ConsumerHooks<M> {
  /** The metrics these hooks update. */
  readonly metrics: ConsumerMetrics;
}

/** The `decision` label: what the consumer did with the delivery. */
export const ConsumerDecisionLabel = {
  /** Acked: `reason` is `executed` (the handler ran) or `duplicate` (an earlier delivery's outcome). */
  Ack: 'ack',
  /** Left for a later redelivery: `reason` is `in_progress`, `store_unavailable`, `handler_error` or `lease_lost`. */
  Retry: 'retry',
  /** Dead-lettered: `reason` is `handler_error`, `mismatch` or `invalid_key`. */
  DeadLetter: 'dead_letter',
} as const;

// Every key of PrometheusConsumerHooksOptions, checked by the compiler both ways: a misspelt option is refused instead of
// leaving its default in force.
const PROMETHEUS_CONSUMER_HOOKS_FIELDS = Object.keys({
  registry: true,
  prefix: true,
} as const satisfies Record<keyof PrometheusConsumerHooksOptions, true>);

/**
 * Hooks that count an idempotent consumer's decisions in Prometheus metrics. Pass them as the consumer's
 * `hooks` (with your own through `combineHooks`); consumers sharing a registry share the metrics, told
 * apart by the `consumer` label (the consumer's `name`).
 *
 * | metric | labels | counts |
 * |---|---|---|
 * | `idempotency_consumer_messages_total` | `consumer`, `decision`, `reason` | every delivery: `ack` (`executed`, `duplicate`), `retry` (`in_progress`, `store_unavailable`, `handler_error`, `lease_lost`), `dead_letter` (`handler_error`, `mismatch`, `invalid_key`) |
 * | `idempotency_consumer_broker_errors_total` | `consumer`, `operation` | broker operations that failed (`ack`, `retry`, `dead_letter`, `process`, `touch`; the broker redelivers), and the consumer's own reads (`consume`, `read`, `create-group`, `cancelled`, `channel-closed`) |
 *
 * @param options.registry where to register the metrics (default: prom-client's global `register`)
 * @param options.prefix prepended to every metric name (default `'idempotency_'`)
 * @see docs/observability.md
 * @example
 * import { idempotentConsumer } from 'idempotency-kit/amqp';
 * import { prometheusConsumerHooks, prometheusHooks } from 'idempotency-kit/prometheus';
 *
 * await idempotentConsumer(channel, ship, {
 *   queue: 'orders',
 *   name: 'shipping',
 *   idempotency: { store, namespace: 'shipping', hooks: prometheusHooks() },
 *   hooks: prometheusConsumerHooks(),
 * });
 */
export function prometheusConsumerHooks<M = unknown>(
  options: PrometheusConsumerHooksOptions = {},
): PrometheusConsumerHooks<M> {
  knownFields(options, 'prometheusConsumerHooks', PROMETHEUS_CONSUMER_HOOKS_FIELDS);
  const prefix = metricPrefix(options.prefix, 'idempotency_', 'prometheusConsumerHooks');
  const registry = options.registry ?? register;
  const metrics: ConsumerMetrics = {
    messages: counterIn(
      registry,
      `${prefix}consumer_messages_total`,
      'Deliveries handled by idempotent consumers, by what was done with them and why.',
      ['consumer', 'decision', 'reason'],
    ),
    brokerErrors: counterIn(
      registry,
      `${prefix}consumer_broker_errors_total`,
      'Broker operations of idempotent consumers that failed (acks, redeliveries, dead-letter publishes, their own reads).',
      ['consumer', 'operation'],
    ),
  };
  const { messages, brokerErrors } = metrics;
  const count = (consumer: string, decision: string, reason: string) =>
    messages.inc({ consumer, decision, reason });

  return {
    metrics,
    onExecuted({ consumer }) {
      count(consumer, ConsumerDecisionLabel.Ack, 'executed');
    },
    onDuplicate({ consumer }) {
      count(consumer, ConsumerDecisionLabel.Ack, 'duplicate');
    },
    onRetry({ consumer, reason }: { consumer: string; reason: RetryReason }) {
      count(consumer, ConsumerDecisionLabel.Retry, reason);
    },
    onDeadLetter({ consumer, reason }: { consumer: string; reason: DeadLetterReason }) {
      count(consumer, ConsumerDecisionLabel.DeadLetter, reason);
    },
    onBrokerError({ consumer, operation }) {
      brokerErrors.inc({ consumer, operation });
    },
    // The consumer's own reads failing (a deleted JetStream consumer, a Redis Streams group gone) are
    // broker errors too, outside any delivery.
    onConsumerError({ consumer, operation }) {
      brokerErrors.inc({ consumer, operation });
    },
  };
}
