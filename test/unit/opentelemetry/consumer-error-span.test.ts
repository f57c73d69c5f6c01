/**
 * `onConsumerError` (a consumer's failure as a whole, outside any delivery) used to be ignored by the
 * OpenTelemetry consumer hooks: a JetStream consumer deleted or a connection closed left no trace. It now
 * starts a span of its own, since no delivery's span is active where the consumer's loop reports it.
 */
import { SpanStatusCode, trace } from '@opentelemetry/api';
import { afterAll, beforeAll, beforeEach, expect, it } from 'vitest';
import {
  ConsumerAttribute,
  IdempotencySpan,
  openTelemetryConsumerHooks,
} from '../../../src/opentelemetry/index.js';
import { startTracing } from '../../helpers/tracing.js';

let tracing: ReturnType<typeof startTracing>;
beforeAll(() => {
  tracing = startTracing();
});
afterAll(async () => {
  await tracing.stop();
});
beforeEach(() => {
  tracing.exporter.reset();
});

it('records a failure of the consumer as a whole as a root span with status ERROR', () => {
  // Arrange: reported from inside an unrelated active span (what the consumer was started in).
  const hooks = openTelemetryConsumerHooks();
  // Act
  trace.getTracer('test').startActiveSpan('startup', (startup) => {
    hooks.onConsumerError?.({
      consumer: 'shipping',
      operation: 'consume',
      error: new Error('consumer deleted'),
    });
    startup.end();
  });
  // Assert
  const [span] = tracing.spans(IdempotencySpan.ConsumerError);
  expect(span?.attributes).toEqual({
    [ConsumerAttribute.Name]: 'shipping',
    [ConsumerAttribute.Operation]: 'consume',
  });
  expect(span?.status).toEqual({ code: SpanStatusCode.ERROR, message: 'consumer deleted' });
  expect(span?.events.map((event) => [event.name, event.attributes])).toEqual([
    ['exception', { 'exception.type': 'Error', 'exception.message': 'consumer deleted' }],
  ]);
  // Its own trace: not a child of the span that happened to be active.
  const [startup] = tracing.spans('startup');
  expect(span?.spanContext().traceId).not.toBe(startup?.spanContext().traceId);
  expect(span?.parentSpanContext).toBeUndefined();
});

it('records what was thrown when it is not an Error', () => {
  // Act
  openTelemetryConsumerHooks().onConsumerError?.({
    consumer: 'orders',
    operation: 'read',
    error: 'NOGROUP',
  });
  // Assert
  const [span] = tracing.spans(IdempotencySpan.ConsumerError);
  expect(span?.status).toEqual({ code: SpanStatusCode.ERROR, message: 'NOGROUP' });
  expect(span?.events[0]?.attributes).toEqual({ 'exception.message': 'NOGROUP' });
});
