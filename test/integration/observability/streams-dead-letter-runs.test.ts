/**
 * The consumer's own records (a dead letter recorded before it is written, a delivery handed back) are no
 * runs of the application: a dead-lettered message is one failed run in `idempotency_runs_total`, not a
 * failed one and an executed one, and its span keeps the outcome and key hash of the message's run.
 */
import { context, trace } from '@opentelemetry/api';
import { Registry } from 'prom-client';
import { createClient } from 'redis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { combineHooks, createIdempotency, memoryStore } from '../../../src/index.js';
import { IdempotencyAttribute, openTelemetryHooks } from '../../../src/opentelemetry/index.js';
import { prometheusHooks } from '../../../src/prometheus/index.js';
import { idempotentConsumer } from '../../../src/redis-streams/index.js';
import { env } from '../../helpers/env.js';
import { streamsFixture } from '../../helpers/streams-fixture.js';
import { startTracing } from '../../helpers/tracing.js';
import { waitUntil } from '../../helpers/wait-until.js';

describe('engine metrics of a Redis Streams consumer that dead-letters', () => {
  const fixture = streamsFixture();
  const { run, streams, cleanups, add } = fixture;
  let tracing: ReturnType<typeof startTracing>;

  beforeAll(() => {
    tracing = startTracing();
  });

  afterAll(async () => {
    await tracing?.stop();
  });

  it('counts one failed run per dead letter, and no executed one', async () => {
    const stream = `ik-test:obs-dead-letter-runs:${run}`;
    streams.push(stream, `${stream}:dlq`);
    const registry = new Registry();
    const outcomes: string[] = [];
    const engine = createIdempotency({
      store: memoryStore(),
      namespace: 'letters',
      hooks: combineHooks(prometheusHooks({ registry }), openTelemetryHooks(), {
        onExecuted: () => void outcomes.push('executed'),
        onReplayed: () => void outcomes.push('replayed'),
        onFailed: () => void outcomes.push('failed'),
      }),
    });
    const client = createClient({ url: env.redisUrl });
    await client.connect();
    const blocking = createClient({ url: env.redisUrl });
    await blocking.connect();
    cleanups.push(
      () => client.destroy(),
      () => blocking.destroy(),
    );
    // The span of the delivery: the handler's, made active for the whole consumer here (the consumer's
    // loop runs in the context it was started in).
    const span = trace.getTracer('test').startSpan('deliveries');
    let letters = 0;
    const consumer = await context.with(trace.setSpan(context.active(), span), () =>
      idempotentConsumer(
        client,
        () => {
          throw new Error('address unknown');
        },
        {
          stream,
          group: 'workers',
          name: `obs-dead-letter-runs-${run}`,
          consumer: 'a',
          idempotency: engine,
          maxDeliveries: 1,
          blockingClient: blocking,
          block: '100ms',
          hooks: { onDeadLetter: () => void letters++ },
        },
      ),
    );
    cleanups.push(() => consumer.close());
    await add(stream, 'order-dead-1');
    await waitUntil('the dead letter', () => letters === 1, 10_000);
    await consumer.close();
    span.end();

    expect(outcomes).toEqual(['failed']);
    const text = await registry.metrics();
    expect(text).toContain('idempotency_runs_total{namespace="letters",outcome="failed"} 1');
    expect(text).not.toContain('outcome="executed"');
    const [exported] = tracing.spans('deliveries');
    expect(exported?.attributes[IdempotencyAttribute.Outcome]).toBe('failed');
    expect(exported?.attributes[IdempotencyAttribute.KeyHash]).toBe(
      engine.storageKeyFor('order-dead-1', `consumer:obs-dead-letter-runs-${run}`),
    );
  });
});
