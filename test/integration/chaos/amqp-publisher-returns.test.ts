/**
 * The outbox's RabbitMQ publisher when the link breaks between a `basic.return` and the confirm of the
 * same publish (a real server, through a proxy that drops the connection right before the `basic.ack`):
 * the return must not outlive its channel and fail the next publish of that message id as "unroutable".
 */
import { randomBytes } from 'node:crypto';
import amqp from 'amqplib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { amqpPublisher, type OutboxMessage } from '../../../src/outbox/index.js';
import {
  type AmqpFrameProxy,
  BASIC_ACK,
  BASIC_RETURN,
  startAmqpFrameProxy,
} from '../../helpers/amqp-frame-proxy.js';
import { env, requireService } from '../../helpers/env.js';

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
