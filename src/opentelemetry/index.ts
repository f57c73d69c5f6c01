/**
 * `idempotency-kit/opentelemetry`: hooks that annotate the active span with each run's outcome (engine
 * hooks) and with each delivery's decision (consumer hooks), through `@opentelemetry/api` (an optional
 * peer: install it to use this entry).
 * @module
 */
export {
  ConsumerAttribute,
  IdempotencyAttribute,
  IdempotencyEvent,
  IdempotencySpan,
} from './attributes.js';
export type { OpenTelemetryConsumerHooksOptions } from './consumer-hooks.js';
export { openTelemetryConsumerHooks } from './consumer-hooks.js';
export type { OpenTelemetryHooksOptions } from './open-telemetry-hooks.js';
export { openTelemetryHooks } from './open-telemetry-hooks.js';
