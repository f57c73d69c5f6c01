/**
 * A retry copy given up on (`brokerTimeout`) whose answer comes only after `close()`, against a real
 * RabbitMQ: the consumer's link stalls (a TCP proxy holds every byte both ways) right after its handler
 * failed, so the copy's publish reaches the broker late; its retry queue was deleted meanwhile, so the
 * broker returns it (`basic.return`) and then confirms it. `close()` used to take the channel's `return`
 * listener off as soon as no delivery held a slot, and the copy given up on held none: the late return went
 * unseen, the late confirm was taken for a routed copy, and the original was acked: the message was lost.
 * Now the listener stays until every copy awaiting its confirm has settled.
 */
import { connect } from 'amqplib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idempotentConsumer } from '../../../src/amqp/index.js';
import { createIdempotency, memoryStore } from '../../../src/index.js';
import { AmqpQueues, waitUntil } from '../../helpers/amqp-queues.js';
import { env, requireService } from '../../helpers/env.js';
import { startTcpProxy, type TcpProxy } from '../../helpers/tcp-proxy.js';

describe('amqp consumer: a copy returned after close()', () => {
  const queues = new AmqpQueues();
  let proxy: TcpProxy;

  beforeAll(async () => {
    await requireService('RabbitMQ', env.amqpUrl);
    await queues.open();
    const target = new URL(env.amqpUrl);
    proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port || 5672) });
  });

  afterAll(async () => {
    await proxy?.close();
    await queues.close();
  });

  it('never acks the original of a retry copy returned and confirmed late, after close()', async () => {
    // Arrange: a consumer through the proxy; its handler stalls the link, then fails.
    const queue = await queues.queue('late-return');
    const through = new URL(env.amqpUrl);
    through.port = String(proxy.port);
    const connection = await connect(through.href);
    connection.on('error', () => {});
    const channel = await connection.createConfirmChannel();
    channel.on('error', () => {});
    const brokerErrors: Array<{ operation: string; error: unknown }> = [];
    const consumer = await idempotentConsumer(
      channel,
      () => {
        proxy.pause();
        throw new Error('boom');
      },
      {
        queue,
        name: queue,
        idempotency: createIdempotency({ store: memoryStore() }),
        concurrency: 1,
        maxDeliveries: 5,
        backoff: { initial: '1m', max: '1m', jitter: false },
        brokerTimeout: '300ms',
        drainTimeout: '1s',
        hooks: { onBrokerError: (event) => void brokerErrors.push(event) },
      },
    );
    // The retry queue is gone: the copy will be unroutable, returned, then confirmed.
    await queues.channel.deleteQueue(`${queue}.retry`);
    await queues.publish(queue, 'a', { messageId: 'fail-1' });
    await waitUntil('the retry to be given up', () => brokerErrors.length === 1);
    expect(brokerErrors[0]?.operation).toBe('retry');
    // The cancel is held too: close() resolves false after drainTimeout, nothing in flight.
    expect(await consumer.close()).toBe(false);

    // Act: the link recovers; the copy reaches the broker, which returns it and confirms it, late.
    proxy.resume();
    await new Promise((resolve) => setTimeout(resolve, 1_000));

    // Assert: the original was never acked: it comes back once the consumer's connection closes. (Before,
    // it was acked on the late confirm, and the queue stayed empty: the message was lost.)
    await connection.close().catch(() => {});
    await waitUntil('the original back', async () => (await queues.count(queue)) === 1);
    expect(await queues.count(queue)).toBe(1);
  });
});
