/**
 * Type test, checked by `tsc --noEmit -p tsconfig.json` (never run): `combineHooks` takes a plain hooks
 * object beside `prometheusHooks()`. Its hook type used to be inferred from the first member, so
 * `combineHooks(prometheusHooks(), { onFailed: … })` was refused (the plain object lacked `PrometheusHooks`'
 * `metrics`) and users had to write `combineHooks<IdempotencyHooks>(…)`. The hook type now comes from where
 * the result goes, else `IdempotencyHooks`, and every member is still checked against it.
 */
import {
  type AmqpConfirmChannel,
  type AmqpMessage,
  type ConsumerHooks,
  idempotentConsumer,
} from '../../src/amqp/index.js';
import { idempotency } from '../../src/express/index.js';
import {
  combineHooks,
  createIdempotency,
  type IdempotencyHooks,
  memoryStore,
} from '../../src/index.js';
import { openTelemetryConsumerHooks, openTelemetryHooks } from '../../src/opentelemetry/index.js';
import { prometheusConsumerHooks, prometheusHooks } from '../../src/prometheus/index.js';

declare const channel: AmqpConfirmChannel;
const store = memoryStore();
const seen: unknown[] = [];

// The natural calls: a plain object beside the metrics, typed by the hook it defines.
createIdempotency({
  store,
  hooks: combineHooks(prometheusHooks(), { onFailed: (event) => seen.push(event.stored) }),
});
idempotency({
  store,
  hooks: combineHooks(prometheusHooks(), openTelemetryHooks(), undefined, {
    onReplicationShort: (event) => seen.push(event.acknowledged, event.required),
  }),
});
// Without a destination, the hook type is the engine's.
const standalone: IdempotencyHooks = combineHooks(openTelemetryHooks(), prometheusHooks(), {
  onLeaseLost: (event) => seen.push(event.token),
});
// The explicit type argument still works.
combineHooks<IdempotencyHooks>(prometheusHooks(), { onMismatch: (event) => seen.push(event) });

createIdempotency({
  store,
  // @ts-expect-error a misspelt hook is refused, not silently never called
  hooks: combineHooks(prometheusHooks(), { onFaild: () => {} }),
});
createIdempotency({
  store,
  // @ts-expect-error a hook's parameter is checked against the event it receives
  hooks: combineHooks(prometheusHooks(), { onFailed: (event: string) => seen.push(event) }),
});
createIdempotency({
  store,
  hooks: combineHooks(prometheusHooks(), {
    // @ts-expect-error the event is typed: it has no `nope`
    onFailed: (event) => seen.push(event.nope),
  }),
});
// @ts-expect-error without a destination too
combineHooks(prometheusHooks(), openTelemetryHooks(), { onLeaseLots: () => {} });
// @ts-expect-error the result carries only the `on…` hooks, not the first member's `metrics`
combineHooks(prometheusHooks()).metrics;

// A consumer's hooks: the broker's message type comes from the consumer's `hooks` option.
void idempotentConsumer(channel, async () => {}, {
  queue: 'orders',
  name: 'shipping',
  idempotency: {
    store,
    hooks: combineHooks(prometheusHooks(), { onTakeover: (event) => seen.push(event.attempt) }),
  },
  hooks: combineHooks(prometheusConsumerHooks(), openTelemetryConsumerHooks(), {
    onDeadLetter: (event) => seen.push(event.message.properties.messageId, event.error.message),
  }),
});
void idempotentConsumer(channel, async () => {}, {
  queue: 'orders',
  name: 'shipping',
  idempotency: { store },
  hooks: combineHooks(prometheusConsumerHooks(), {
    // @ts-expect-error an engine hook is not a consumer hook
    onReplayed: () => {},
  }),
});
// Kept in a variable first, consumer hooks name their type.
const consumerHooks = combineHooks<ConsumerHooks<AmqpMessage>>(prometheusConsumerHooks(), {
  onRetry: (event) => seen.push(event.message.fields.deliveryTag, event.delayMs),
});
// @ts-expect-error without it they would be taken for an engine's
combineHooks(prometheusConsumerHooks(), consumerHooks);

void standalone;
