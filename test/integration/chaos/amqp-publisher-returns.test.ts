/**
 * The outbox's RabbitMQ publisher when the link breaks between a `basic.return` and the confirm of the
 * same publish (a real server, through a proxy that drops the connection right before the `basic.ack`):
 * the return must not outlive its channel and fail the next publish of that message id as "unroutable".
 */
import { randomBytes } from 'node:crypto';
import amqp from 'amqplib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { amqpPublisher, createRelay, type OutboxMessage } from '../../../src/outbox/index.js';
import {
  type AmqpFrameProxy,
  BASIC_ACK,
  BASIC_RETURN,
  startAmqpFrameProxy,
} from '../../helpers/amqp-frame-proxy.js';
import { env, requireService } from '../../helpers/env.js';
import { memorySource } from '../../helpers/outbox-memory-source.js';

const run = randomBytes(4).toString('hex');

function message(id: string): OutboxMessage {
  return {
    id,
    topic: 'order.placed',
    key: null,
    payload: Buffer.from('{}'),
    contentType: 'application/json',
    headers: {},
    rowId: '1',
    attempt: 1,
    createdAt: Date.now(),
  };
}

describe('amqpPublisher: a channel lost between a return and its confirm', () => {
  let proxy: AmqpFrameProxy;
  let admin: amqp.ChannelModel;
  let adminChannel: amqp.Channel;
  const queue = `outbox-returns-${run}`;

  beforeAll(async () => {
    await requireService('RabbitMQ', env.amqpUrl);
    proxy = await startAmqpFrameProxy(env.amqpUrl);
    admin = await amqp.connect(env.amqpUrl);
    adminChannel = await admin.createChannel();
  });

  afterAll(async () => {
    await adminChannel?.deleteQueue(queue).catch(() => {});
    await admin?.close().catch(() => {});
    await proxy?.close();
  });

  it('publishes the message again once it can be routed, without a stale "unroutable"', async () => {
    // Arrange: the application's channel function reopens a connection once the last one was lost.
    const connections: amqp.ChannelModel[] = [];
    let current: amqp.ConfirmChannel | undefined;
    const channelNow = async () => {
      if (current === undefined) {
        const connection = await amqp.connect(proxy.url);
        connection.on('error', () => {});
        connections.push(connection);
        const channel = await connection.createConfirmChannel();
        channel.on('error', () => {});
        channel.on('close', () => {
          if (current === channel) current = undefined;
        });
        current = channel;
      }
      return current;
    };
    const publisher = amqpPublisher({ channel: channelNow, routingKey: () => queue });
    const sent = message(`msg-${run}`);
    // Act 1: no queue yet, so the broker returns the message; the link drops before its confirm.
    proxy.dropBefore(BASIC_ACK, BASIC_RETURN);
    const first = await publisher.publish(sent).then(
      () => 'published',
      (error: Error) => error.message,
    );
    // Act 2: the queue now exists; the relay publishes the row again, on a new channel.
    await adminChannel.assertQueue(queue, { durable: false });
    while (current !== undefined) await new Promise((resolve) => setTimeout(resolve, 10));
    const second = await publisher.publish(sent).then(
      () => 'published',
      (error: Error) => error.message,
    );
    // Assert
    try {
      expect(first).not.toBe('published');
      expect(second).toBe('published');
      const got = await adminChannel.get(queue, { noAck: true });
      expect(got !== false && got.properties.messageId).toBe(sent.id);
    } finally {
      for (const connection of connections) await connection.close().catch(() => {});
    }
  });
});

describe('amqpPublisher: a channel that hangs without closing (no confirm ever comes)', () => {
  let proxy: AmqpFrameProxy;
  let connection: amqp.ChannelModel | undefined;

  beforeAll(async () => {
    await requireService('RabbitMQ', env.amqpUrl);
    proxy = await startAmqpFrameProxy(env.amqpUrl);
  });

  afterAll(async () => {
    await connection?.close().catch(() => {});
    await proxy?.close();
  });

  it('forgets a publish the relay gave up on: no return watch, no listener left on the channel', async () => {
    // Arrange: a real confirm channel whose confirms the proxy withholds from now on; the channel
    // stays open. A relay whose publishes time out after 300 ms.
    connection = await amqp.connect(proxy.url);
    connection.on('error', () => {});
    const channel = await connection.createConfirmChannel();
    channel.on('error', () => {});
    proxy.withhold(BASIC_ACK);
    const source = memorySource();
    for (const id of [`hung-1-${run}`, `hung-2-${run}`]) source.add(id, `no-such-queue-${run}`);
    const failures: string[] = [];
    const relay = createRelay({
      source,
      publisher: amqpPublisher({ channel }),
      publishTimeoutMs: 300,
      leaseMs: 1000,
      backoff: () => 0,
      onPublishFailed: (_message, error) => failures.push(String(error)),
    });

    // Act: before, each timed-out publish kept its entry (and with it the channel's `return` listener)
    // until its confirm: on this channel, for good.
    const result = await relay.runOnce();

    // Assert
    expect(result).toMatchObject({ claimed: 2, failed: 2 });
    expect(failures).toEqual([
      'Error: publish not confirmed within 300 ms',
      'Error: publish not confirmed within 300 ms',
    ]);
    expect(channel.listenerCount('return')).toBe(0);
  });
});
