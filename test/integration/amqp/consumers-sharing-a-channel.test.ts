/**
 * Many idempotent consumers on one channel (a service consuming a dozen queues over one channel): the
 * channel carries one `return` and one `close` listener for all of them, so Node never warns of a possible
 * EventEmitter leak (it did from the eleventh consumer on), and each event still reaches the consumer it
 * concerns: one consumer's returned copy is that consumer's failure only, and the channel's close ends every
 * consumer still running on it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AmqpConsumer, idempotentConsumer } from '../../../src/amqp/index.js';
import { memoryStore } from '../../../src/index.js';
import { AmqpQueues, waitUntil } from '../../helpers/amqp-queues.js';
import { env, requireService } from '../../helpers/env.js';

const CONSUMERS = 12;

describe('amqp consumers sharing one channel', () => {
  const queues = new AmqpQueues();
  const warnings: Error[] = [];
  const onWarning = (warning: Error) => void warnings.push(warning);

  beforeAll(async () => {
    await requireService('RabbitMQ', env.amqpUrl);
    await queues.open();
    process.on('warning', onWarning);
  });
  afterAll(async () => {
    process.off('warning', onWarning);
    await queues.close();
  });

  it('put one listener per event on the channel, and each event reaches the consumers it concerns', async () => {
    // Arrange: twelve consumers, each on its own queue; the sixth one's retry queue is deleted.
    const { channel } = await queues.consumerChannel();
    const closeListenersBefore = channel.listenerCount('close');
    const names: string[] = [];
    const brokerErrors: Array<{ consumer: string; operation: string; error: unknown }> = [];
    const consumerErrors: Array<{ consumer: string; operation: string }> = [];
    const consumers: AmqpConsumer[] = [];
    for (let i = 0; i < CONSUMERS; i++) {
      const queue = await queues.queue(`shared-${i}`);
      names.push(queue);
      consumers.push(
        await idempotentConsumer(
          channel,
          () => {
            throw new Error('transient failure');
          },
          {
            queue,
            name: queue,
            idempotency: { store: memoryStore() },
            backoff: { initial: 60_000, jitter: false },
            hooks: {
              onBrokerError: ({ consumer, operation, error }) =>
                void brokerErrors.push({ consumer, operation, error }),
              onConsumerError: ({ consumer, operation }) =>
                void consumerErrors.push({ consumer, operation }),
            },
          },
        ),
      );
    }
    const [, , , , , returnedQueue, , routedQueue] = names as [string, ...string[]];
    await queues.channel.deleteQueue(`${returnedQueue}.retry`);

    // Act: a failing message on the consumer whose retry copy is returned, and one on another consumer.
    await queues.publish(returnedQueue!, 'pay', { messageId: 'returned-1' });
    await queues.publish(routedQueue!, 'pay', { messageId: 'routed-1' });
    await waitUntil('the returned retry copy reported', () => brokerErrors.length > 0);
    await waitUntil(
      'the routed retry copy in its queue',
      async () => (await queues.count(`${routedQueue}.retry`)) === 1,
    );
    const listeners = {
      return: channel.listenerCount('return'),
      close: channel.listenerCount('close') - closeListenersBefore,
    };
    // Half the consumers closed, then the channel: the other half are ended by the close.
    for (const consumer of consumers.slice(0, CONSUMERS / 2)) await consumer.close();
    await channel.close();
    await Promise.all(consumers.map((consumer) => consumer.done));

    // Assert
    expect(listeners).toEqual({ return: 1, close: 1 });
    expect(warnings.filter((warning) => warning.name === 'MaxListenersExceededWarning')).toEqual(
      [],
    );
    expect(brokerErrors).toMatchObject([
      {
        consumer: returnedQueue,
        operation: 'retry',
        error: { name: 'UnroutableCopyError', queue: `${returnedQueue}.retry` },
      },
    ]);
    expect(consumerErrors).toEqual(
      names.slice(CONSUMERS / 2).map((consumer) => ({ consumer, operation: 'channel-closed' })),
    );
    // Taken off once the last consumer's deliveries have settled, which nothing announces: polled.
    await waitUntil('no return listener', () => channel.listenerCount('return') === 0, 5000);
    expect(channel.listenerCount('close')).toBe(closeListenersBefore);
  });
});
