/**
 * `idempotency-kit/opentelemetry`: engine hooks that annotate the active span with each run's outcome,
 * through `@opentelemetry/api` (an optional peer: install it to use this entry).
 * @module
 */
export { IdempotencyAttribute, IdempotencyEvent } from './attributes.js';
export type { OpenTelemetryHooksOptions } from './open-telemetry-hooks.js';
export { openTelemetryHooks } from './open-telemetry-hooks.js';
