/**
 * `idempotency-kit/prometheus`: engine hooks that count every run in Prometheus metrics, through
 * prom-client (an optional peer: install it to use this entry).
 * @module
 */
export type { IdempotencyMetrics } from './metrics.js';
export { DEFAULT_EXECUTION_BUCKETS } from './metrics.js';
export type { PrometheusHooks, PrometheusHooksOptions } from './prometheus-hooks.js';
export { prometheusHooks } from './prometheus-hooks.js';
