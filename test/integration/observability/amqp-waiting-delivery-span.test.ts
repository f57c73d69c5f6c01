/**
 * A RabbitMQ delivery that waited for a handler slot (`concurrency` below the prefetch) is handled in the
 * async context it arrived in: its hooks annotate its own span (the one `@opentelemetry/instrumentation-
 * amqplib` made active), never the span of the delivery whose end freed the slot.
 */
import { randomUUID } from 'node:crypto';
import { context, type Span, trace } from '@opentelemetry/api';
import { type ChannelModel, type ConfirmChannel, type ConsumeMessage, connect } from 'amqplib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idempotentConsumer } from '../../../src/amqp/index.js';
import { combineHooks, createIdempotency, memoryStore } from '../../../src/index.js';
import {
  ConsumerAttribute,
  IdempotencyAttribute,
  openTelemetryConsumerHooks,
  openTelemetryHooks,
} from '../../../src/opentelemetry/index.js';
import { env, requireService } from '../../helpers/env.js';
import { startTracing } from '../../helpers/tracing.js';

/** Run every delivery of `channel` inside a span of its own, as the amqplib instrumentation does. */
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

describe('spans of RabbitMQ deliveries that waited for a handler slot', () => {
  const queue = `test.observability-slots.${randomUUID()}`;
  let connection: ChannelModel;
  let channel: ConfirmChannel;
  let tracing: ReturnType<typeof startTracing>;

  beforeAll(async () => {
    await requireService('rabbitmq', env.amqpUrl);
    connection = await connect(env.amqpUrl);
    channel = await connection.createConfirmChannel();
    await channel.assertQueue(queue, { durable: false });
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
  });

  it("annotates each delivery's own span, not the span of the one before it", async () => {
    const deliveries = traceDeliveries(channel);
    const idempotency = createIdempotency({
      store: memoryStore(),
      namespace: 'slots-worker',
      hooks: openTelemetryHooks(),
    });
    let settled = 0;
    const consumer = await idempotentConsumer(
      channel,
      // Long enough for every message to arrive while the first one holds the only slot.
      () => new Promise<void>((resolve) => setTimeout(resolve, 50)),
      {
        queue,
        name: 'slots',
        idempotency,
        prefetch: 3,
        concurrency: 1,
        hooks: combineHooks(openTelemetryConsumerHooks(), { onExecuted: () => void settled++ }),
      },
    );
    for (const id of ['order-1', 'order-2', 'order-3']) {
      channel.sendToQueue(queue, Buffer.from('{}'), { messageId: id });
    }
    await channel.waitForConfirms();
    const deadline = Date.now() + 10_000;
    while (settled < 3 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    await consumer.close();
    for (const { span } of deliveries) span.end();

    const seen = deliveries.map(({ message }, i) => {
      const [exported] = tracing.spans(`deliver ${i}`);
      return {
        id: message.properties.messageId as string,
        key: exported?.attributes[IdempotencyAttribute.KeyHash],
        outcome: exported?.attributes[IdempotencyAttribute.Outcome],
        decision: exported?.attributes[ConsumerAttribute.Decision],
      };
    });
    expect(seen).toEqual(
      ['order-1', 'order-2', 'order-3'].map((id) => ({
        id,
        key: idempotency.storageKeyFor(id, 'consumer:slots'),
        outcome: 'executed',
        decision: 'ack',
      })),
    );
  });
});
