/**
 * AMQP consumers that end while their channel lives on: the broker cancels one (its queue deleted: the
 * channel stays open), or `close()` gives up waiting for a handler still running (`drainTimeout`). A
 * service then starts the next consumer on that same channel; life after life, the channel must keep
 * nothing of the consumers that ended, once their deliveries have settled. Before, each such consumer
 * left its `return` listener on the channel for good (and Node warned of a possible EventEmitter leak once
 * there were eleven).
 */
import { randomBytes } from 'node:crypto';
import amqp from 'amqplib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idempotentConsumer } from '../../../src/amqp/index.js';
import { createIdempotency } from '../../../src/index.js';
import { memoryStore } from '../../../src/store/memory-store.js';
import { env, requireService } from '../../helpers/env.js';
import { waitUntil } from '../../helpers/wait-until.js';

const run = randomBytes(4).toString('hex');
const LIVES = 20;

describe('AMQP consumers ending one after another on one channel', () => {
  let connection: amqp.ChannelModel;
  let admin: amqp.ConfirmChannel;
  const queues: string[] = [];

  beforeAll(async () => {
    await requireService('RabbitMQ', env.amqpUrl);
    connection = await amqp.connect(env.amqpUrl);
    admin = await connection.createConfirmChannel();
  });

  afterAll(async () => {
    for (const queue of queues) {
      for (const name of [queue, `${queue}.retry`, `${queue}.dlq`]) {
        await admin?.deleteQueue(name).catch(() => {});
      }
    }
    await connection?.close().catch(() => {});
  });

  /** A queue of this run, with one message published to it. */
  async function queueWithMessage(queue: string, id: string): Promise<void> {
    if (!queues.includes(queue)) queues.push(queue);
    await admin.assertQueue(queue, { durable: false });
    admin.sendToQueue(queue, Buffer.from('{}'), { messageId: id });
    await admin.waitForConfirms();
  }

  /**
   * The channel's listeners once an ended consumer's deliveries have settled: they settle after it ended,
   * and nothing tells when the last ack went out, so polled (with a bound) for the `return` listener to go.
   */
  async function listenersOnceSettled(channel: amqp.ConfirmChannel) {
    await waitUntil('no return listener', () => channel.listenerCount('return') === 0, 5000).catch(
      () => {},
    );
    return { return: channel.listenerCount('return'), close: channel.listenerCount('close') };
  }

  it('leave nothing on it when the broker cancelled them', async () => {
    // Arrange
    const channel = await connection.createConfirmChannel();
    const idempotency = createIdempotency({ store: memoryStore() });
    const queue = `ik-soak.cancelled-${run}`;
    let handled = 0;
    const cancelled: string[] = [];
    // One life: the consumer handles a message, then its queue is deleted and the broker cancels it.
    const life = async (i: number) => {
      await queueWithMessage(queue, `m-${i}-${run}`);
      const consumer = await idempotentConsumer(channel, async () => void handled++, {
        idempotency,
        name: 'soak',
        queue,
        hooks: { onConsumerError: ({ operation }) => void cancelled.push(operation) },
      });
      await waitUntil('the message to be handled', () => handled > i);
      await admin.deleteQueue(queue);
      await consumer.done;
    };
    await life(0);
    const afterWarmUp = await listenersOnceSettled(channel);
    // Act
    for (let i = 1; i <= LIVES; i++) await life(i);
    // Assert
    expect(cancelled).toEqual(Array(LIVES + 1).fill('cancelled'));
    expect(await listenersOnceSettled(channel)).toEqual(afterWarmUp);
  });

  it('leave nothing on it when close() gave up on a handler that finished later', async () => {
    // Arrange
    const channel = await connection.createConfirmChannel();
    const idempotency = createIdempotency({ store: memoryStore() });
    const queue = `ik-soak.slow-${run}`;
    let started = 0;
    let finish = () => {};
    // One life: close() is called while the handler runs, and times out; the handler ends afterwards.
    const life = async (i: number) => {
      await queueWithMessage(queue, `m-${i}-${run}`);
      const consumer = await idempotentConsumer(
        channel,
        async () => {
          started++;
          await new Promise<void>((resolve) => {
            finish = resolve;
          });
        },
        { idempotency, name: 'soak', queue, drainTimeout: '20ms' },
      );
      await waitUntil('the handler to start', () => started > i);
      expect(await consumer.close()).toBe(false);
      finish();
    };
    await life(0);
    const afterWarmUp = await listenersOnceSettled(channel);
    // Act
    for (let i = 1; i <= LIVES; i++) await life(i);
    // Assert
    expect(await listenersOnceSettled(channel)).toEqual(afterWarmUp);
  });
});
