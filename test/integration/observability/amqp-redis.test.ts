/**
 * Observability of a consumer: an idempotent RabbitMQ consumer on the shared Redis store counts its runs
 * in the engine's metrics under its own namespace, and its decisions (ack, retry, dead letter, and why)
 * in the consumer metrics and on each delivery's span.
 */
import { randomUUID } from 'node:crypto';
import { context, type Span, trace } from '@opentelemetry/api';
import { type ChannelModel, type ConfirmChannel, type ConsumeMessage, connect } from 'amqplib';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idempotentConsumer } from '../../../src/amqp/index.js';
import { combineHooks, createIdempotency } from '../../../src/index.js';
import {
  ConsumerAttribute,
  IdempotencyEvent,
  openTelemetryConsumerHooks,
} from '../../../src/opentelemetry/index.js';
import { prometheusConsumerHooks, prometheusHooks } from '../../../src/prometheus/index.js';
import { redisStore } from '../../../src/redis/index.js';
import { env, requireService } from '../../helpers/env.js';
import { connectClient, deleteKeys, type TestRedisClient } from '../../helpers/redis-clients.js';
import { startTracing } from '../../helpers/tracing.js';

/**
 * Run every delivery of `channel` inside a span of its own, as `@opentelemetry/instrumentation-amqplib`
 * does; returns the spans in delivery order.
 */
function traceDeliveries(channel: ConfirmChannel): Array<{ message: ConsumeMessage; span: Span }> {
  const deliveries: Array<{ message: ConsumeMessage; span: Span }> = [];
  const consume = channel.consume.bind(channel);
  channel.consume = ((queue, onMessage, options) =>
    consume(
      queue,
      (message) => {
        if (message === null) return onMessage(message);
        const span = trace.getTracer('test').startSpan(`deliver ${deliveries.length}`);
        deliveries.push({ message, span });
        return context.with(trace.setSpan(context.active(), span), () => onMessage(message));
      },
      options,
    )) as ConfirmChannel['consume'];
  return deliveries;
}

describe('metrics of a RabbitMQ consumer on Redis', () => {
  const prefix = `test:observability-amqp:${randomUUID()}:`;
  const queue = `test.observability.${randomUUID()}`;
  let connection: ChannelModel;
  let channel: ConfirmChannel;
  let redis: TestRedisClient;
  let tracing: ReturnType<typeof startTracing>;

  beforeAll(async () => {
    await requireService('rabbitmq', env.amqpUrl);
    await requireService('redis', env.redisUrl);
    connection = await connect(env.amqpUrl);
    channel = await connection.createConfirmChannel();
    await channel.assertQueue(queue, { durable: false });
    redis = await connectClient('node-redis', env.redisUrl);
    tracing = startTracing();
  });

  afterAll(async () => {
    await tracing?.stop();
    if (channel !== undefined) {
      for (const name of [queue, `${queue}.retry`, `${queue}.dlq`]) {
        await channel.deleteQueue(name).catch(() => undefined);
      }
    }
    await connection?.close();
    if (redis !== undefined) {
      await deleteKeys(redis.client, prefix);
      await redis.close();
    }
  });

  it('counts one execution and the duplicates as replays, under the consumer’s namespace', async () => {
    const registry = new Registry();
    const idempotency = createIdempotency({
      store: redisStore({ client: redis.client, prefix, checkEvictionPolicy: false }),
      namespace: 'shipping-worker',
      hooks: prometheusHooks({ registry }),
    });
    let settled = 0;
    let executions = 0;
    const consumer = await idempotentConsumer(
      channel,
      async () => {
        executions++;
      },
      {
        queue,
        name: 'shipping',
        idempotency,
        hooks: { onExecuted: () => void settled++, onDuplicate: () => void settled++ },
      },
    );
    // Published one at a time: each copy arrives after the previous one completed.
    for (let i = 0; i < 5; i++) {
      channel.sendToQueue(queue, Buffer.from('{}'), { messageId: 'order-1001' });
      await channel.waitForConfirms();
      while (settled <= i) await new Promise((resolve) => setTimeout(resolve, 10));
    }
    await consumer.close();

    const text = await registry.metrics();
    expect(executions).toBe(1);
    expect(text).toContain(
      'idempotency_runs_total{namespace="shipping-worker",outcome="executed"} 1',
    );
    expect(text).toContain(
      'idempotency_runs_total{namespace="shipping-worker",outcome="replayed"} 4',
    );
  });

  it('counts each delivery by decision and reason, and tags its span with them', async () => {
    const registry = new Registry();
    const decisionQueue = `${queue}.decisions`;
    const tracingChannel = await connection.createConfirmChannel();
    await tracingChannel.assertQueue(decisionQueue, { durable: false });
    const deliveries = traceDeliveries(tracingChannel);
    let settled = 0;
    const consumer = await idempotentConsumer(
      tracingChannel,
      async (message) => {
        if (message.properties.messageId === 'order-fail') throw new Error('address unknown');
      },
      {
        queue: decisionQueue,
        name: 'billing',
        idempotency: createIdempotency({
          store: redisStore({ client: redis.client, prefix, checkEvictionPolicy: false }),
          namespace: 'billing-worker',
        }),
        maxDeliveries: 2,
        backoff: { initial: 10, max: 10 },
        hooks: combineHooks(prometheusConsumerHooks({ registry }), openTelemetryConsumerHooks(), {
          onExecuted: () => void settled++,
          onDuplicate: () => void settled++,
          onDeadLetter: () => void settled++,
        }),
      },
    );
    const publish = async (messageId: string | undefined, settles: number) => {
      tracingChannel.sendToQueue(
        decisionQueue,
        Buffer.from('{}'),
        messageId === undefined ? {} : { messageId },
      );
      await tracingChannel.waitForConfirms();
      while (settled < settles) await new Promise((resolve) => setTimeout(resolve, 10));
    };
    await publish('order-1', 1);
    await publish('order-1', 2);
    await publish('order-1', 3);
    await publish('order-fail', 4); // a retry, then a dead letter on the second delivery
    await publish(undefined, 5); // no key: a dead letter at once
    await consumer.close();
    for (const name of [`${decisionQueue}.retry`, `${decisionQueue}.dlq`, decisionQueue]) {
      await tracingChannel.deleteQueue(name);
    }
    await tracingChannel.close();

    const text = await registry.metrics();
    const messages = (decision: string, reason: string) =>
      `idempotency_consumer_messages_total{consumer="billing",decision="${decision}",reason="${reason}"}`;
    expect(text).toContain(`${messages('ack', 'executed')} 1`);
    expect(text).toContain(`${messages('ack', 'duplicate')} 2`);
    expect(text).toContain(`${messages('retry', 'handler_error')} 1`);
    expect(text).toContain(`${messages('dead_letter', 'handler_error')} 1`);
    expect(text).toContain(`${messages('dead_letter', 'invalid_key')} 1`);

    for (const { span } of deliveries) span.end();
    const seen = deliveries.map(({ message }, i) => {
      const [exported] = tracing.spans(`deliver ${i}`);
      return {
        id: message.properties.messageId as string | undefined,
        decision: exported?.attributes[ConsumerAttribute.Decision],
        reason: exported?.attributes[ConsumerAttribute.Reason],
        events: exported?.events.map((e) => e.name),
        error: exported?.events[0]?.attributes?.['exception.message'],
      };
    });
    expect(seen).toEqual([
      { id: 'order-1', decision: 'ack', reason: 'executed', events: [], error: undefined },
      { id: 'order-1', decision: 'ack', reason: 'duplicate', events: [], error: undefined },
      { id: 'order-1', decision: 'ack', reason: 'duplicate', events: [], error: undefined },
      {
        id: 'order-fail',
        decision: 'retry',
        reason: 'handler_error',
        events: [],
        error: undefined,
      },
      {
        id: 'order-fail',
        decision: 'dead_letter',
        reason: 'handler_error',
        events: [IdempotencyEvent.DeadLetter],
        error: 'address unknown',
      },
      {
        id: undefined,
        decision: 'dead_letter',
        reason: 'invalid_key',
        events: [IdempotencyEvent.DeadLetter],
        error: 'The message has no idempotency key',
      },
    ]);
  });
});
