/**
 * The outbox's RabbitMQ publisher on a channel the application keeps for weeks: publishers created on it
 * (a relay restarted with a new one) must not pile listeners up on it, and returns that are not a waiting
 * publish's must not be kept. Before, every `amqpPublisher()` added a `return` listener for the channel's
 * life, and each one recorded every return on the channel with nothing ever taking the others' away.
 */
import { randomBytes } from 'node:crypto';
import amqp from 'amqplib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { amqpPublisher, type OutboxMessage } from '../../../src/outbox/index.js';
import { env, requireService } from '../../helpers/env.js';

const run = randomBytes(4).toString('hex');

function message(id: string, topic: string): OutboxMessage {
  return {
    id,
    topic,
    key: null,
    payload: Buffer.from('{}'),
    contentType: 'application/json',
    headers: {},
    rowId: '1',
    attempt: 1,
    createdAt: Date.now(),
  };
}

const outcome = (publishing: Promise<void>) =>
  publishing.then(
    () => 'published',
    (error: Error) => error.message,
  );

describe('amqpPublisher on one long-lived channel', () => {
  let connection: amqp.ChannelModel;
  let channel: amqp.ConfirmChannel;
  const queue = `ik-soak.publisher-${run}`;

  beforeAll(async () => {
    await requireService('RabbitMQ', env.amqpUrl);
    connection = await amqp.connect(env.amqpUrl);
    channel = await connection.createConfirmChannel();
    await channel.assertQueue(queue, { durable: false });
  });

  afterAll(async () => {
    await channel?.deleteQueue(queue).catch(() => {});
    await connection?.close().catch(() => {});
  });

  it('leaves no listener behind, however many publishers were created on the channel', async () => {
    // Arrange: warm-up, one publisher that published (routed and returned) once.
    const warm = amqpPublisher({ channel });
    await warm.publish(message(`warm-${run}`, queue));
    await outcome(warm.publish(message(`warm-unroutable-${run}`, `nowhere-${run}`)));
    const afterWarmUp = channel.listenerCount('return');
    // Act: a relay restarted 50 times, each time with a new publisher on the same channel.
    const answers: string[] = [];
    for (let i = 0; i < 50; i++) {
      const publisher = amqpPublisher({ channel });
      answers.push(await outcome(publisher.publish(message(`m-${i}-${run}`, queue))));
      answers.push(await outcome(publisher.publish(message(`u-${i}-${run}`, `nowhere-${run}`))));
    }
    // Assert: returns still fail their own publish, and the channel has what it had after the warm-up.
    expect(answers.filter((answer) => answer === 'published')).toHaveLength(50);
    expect(answers.filter((answer) => answer.startsWith('unroutable'))).toHaveLength(50);
    expect(channel.listenerCount('return')).toBe(afterWarmUp);
  });

  it('keeps no return of a message it is not waiting for', async () => {
    // Arrange: a publisher created on the channel, then the application's own mandatory message,
    // returned (no queue has its name yet).
    const publisher = amqpPublisher({ channel });
    const target = `ik-soak.late-${run}`;
    const id = `shared-id-${run}`;
    channel.publish('', target, Buffer.from('{}'), { messageId: id, mandatory: true });
    await channel.waitForConfirms();
    // Act: the queue appears, and the publisher publishes a message with that id to it.
    await channel.assertQueue(target, { durable: false });
    try {
      const answer = await outcome(publisher.publish(message(id, target)));
      // Assert: judged on its own publish. Before, the application's return had been recorded for the
      // channel's life, and this routed publish was failed as "unroutable".
      expect(answer).toBe('published');
    } finally {
      await channel.deleteQueue(target);
    }
  });
});
