/**
 * The RabbitMQ consumer's `close()` when the broker hangs without closing the connection (a network
 * partition, through a TCP proxy that stops forwarding): amqplib has no timeout on the cancel's reply, and
 * its heartbeat only ends the connection minutes later, so `close()` must not wait for the cancel past
 * `drainTimeout`.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { connect } from 'amqplib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idempotentConsumer } from '../../../src/amqp/index.js';
import { createIdempotency, memoryStore } from '../../../src/index.js';
import { AmqpQueues, waitUntil } from '../../helpers/amqp-queues.js';
import { env, requireService } from '../../helpers/env.js';
import { startTcpProxy, type TcpProxy } from '../../helpers/tcp-proxy.js';

describe('amqp consumer: close() on a hung broker', () => {
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

  it('resolves false within drainTimeout while the cancel gets no answer', async () => {
    // Arrange: a consumer whose connection goes through the proxy, having handled one message.
    const queue = await queues.queue('close-hung');
    const through = new URL(env.amqpUrl);
    through.port = String(proxy.port);
    const connection = await connect(through.href);
    connection.on('error', () => {});
    const channel = await connection.createConfirmChannel();
    channel.on('error', () => {});
    let executed = 0;
    const consumer = await idempotentConsumer(channel, () => {}, {
      queue,
      name: queue,
      idempotency: createIdempotency({ store: memoryStore() }),
      drainTimeout: '300ms',
      hooks: { onExecuted: () => void executed++ },
    });
    await queues.publish(queue, 'pay 100', { messageId: 'pay-1' });
    await waitUntil('the execution', () => executed === 1);
    proxy.cut();
    // Act
    const started = performance.now();
    const closed = await Promise.race([consumer.close(), sleep(5000).then(() => 'hung' as const)]);
    const elapsed = performance.now() - started;
    // Assert
    expect(closed).toBe(false);
    expect(elapsed).toBeLessThan(2000);
    expect(executed).toBe(1);
  });
});
