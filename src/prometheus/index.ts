/**
 * `idempotency-kit/prometheus`: hooks that count every run of the engine and every decision of an
 * idempotent consumer, a store wrapper that times every store call, and gauges of what a store holds, as
 * Prometheus metrics, through prom-client (an optional peer: install it to use this entry).
 * @module
 */
export type {
  ConsumerMetrics,
  PrometheusConsumerHooks,
  PrometheusConsumerHooksOptions,
} from './consumer-hooks.js';
export { ConsumerDecisionLabel, prometheusConsumerHooks } from './consumer-hooks.js';
export type { IdempotencyMetrics } from './metrics.js';
export { DEFAULT_EXECUTION_BUCKETS, StepResultName } from './metrics.js';
export type { PrometheusHooks, PrometheusHooksOptions } from './prometheus-hooks.js';
export { prometheusHooks } from './prometheus-hooks.js';
export type { StoreMetricsOptions } from './store-metrics.js';
export { DEFAULT_STORE_CALL_BUCKETS, withStoreMetrics } from './store-metrics.js';
export type { StoreStatsOptions } from './store-stats.js';
export { registerStoreStats } from './store-stats.js';
