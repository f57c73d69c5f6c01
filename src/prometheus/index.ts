/**
 * `idempotency-kit/prometheus`: hooks that count every run of the engine, and every decision of an
 * idempotent consumer, and a store wrapper that times every store call, as Prometheus metrics, through
 * prom-client (an optional peer: install it to use this entry).
 * @module
 */
export type {
  ConsumerMetrics,
  PrometheusConsumerHooks,
  PrometheusConsumerHooksOptions,
} from './consumer-hooks.js';
export { ConsumerDecisionLabel, prometheusConsumerHooks } from './consumer-hooks.js';
export type { IdempotencyMetrics } from './metrics.js';
export { DEFAULT_EXECUTION_BUCKETS } from './metrics.js';
export type { PrometheusHooks, PrometheusHooksOptions } from './prometheus-hooks.js';
export { prometheusHooks } from './prometheus-hooks.js';
export type { StoreMetricsOptions } from './store-metrics.js';
export { DEFAULT_STORE_CALL_BUCKETS, withStoreMetrics } from './store-metrics.js';
