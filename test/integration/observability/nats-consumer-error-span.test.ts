/**
 * A JetStream consumer deleted on the server while the idempotent consumer runs, with the OpenTelemetry
 * consumer hooks: the failure used to leave no trace at all (the hooks ignored `onConsumerError`); it is
 * now an `idempotency.consumer_error` span with status ERROR.
 */
import { SpanStatusCode } from '@opentelemetry/api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIdempotency, memoryStore } from '../../../src/index.js';
import { idempotentConsumer, type NatsConsumer } from '../../../src/nats/index.js';
import {
  ConsumerAttribute,
  IdempotencySpan,
  openTelemetryConsumerHooks,
} from '../../../src/opentelemetry/index.js';
import { startTracing } from '../../helpers/tracing.js';
import { type NatsFixture, natsFixture, until } from '../nats/setup.js';

describe('OpenTelemetry consumer hooks: a JetStream consumer deleted', () => {
  let tracing: ReturnType<typeof startTracing>;
  let f: NatsFixture | undefined;
  let running: NatsConsumer | undefined;

  beforeAll(() => {
    tracing = startTracing();
  });

  afterAll(async () => {
    await running?.close();
    await f?.destroy();
    await tracing.stop();
  });

  it('records the failure as an idempotency.consumer_error span', async () => {
    // Arrange
    f = await natsFixture('otel-consumer-error');
    let handled = 0;
    running = await idempotentConsumer(
      await f.js.consumers.get(f.stream, f.durable),
      () => {
        handled++;
      },
      {
        name: f.stream,
        idempotency: createIdempotency({ store: memoryStore() }),
        hooks: openTelemetryConsumerHooks(),
      },
    );
    let ended = false;
    void running.done.then(() => {
      ended = true;
    });
    await f.publish('a');
    await until('the first message', () => handled === 1);

    // Act
    await f.jsm.consumers.delete(f.stream, f.durable);
    await until('done', () => ended, 5000);

    // Assert
    const spans = tracing.spans(IdempotencySpan.ConsumerError);
    expect(spans).toHaveLength(1);
    expect(spans[0]?.attributes).toEqual({
      [ConsumerAttribute.Name]: f.stream,
      [ConsumerAttribute.Operation]: 'consume',
    });
    expect(spans[0]?.status.code).toBe(SpanStatusCode.ERROR);
    expect(spans[0]?.events[0]?.name).toBe('exception');
    expect(String(spans[0]?.events[0]?.attributes?.['exception.message'])).toMatch(
      /consumer (deleted|not found)/i,
    );
  });
});
