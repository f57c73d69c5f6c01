/**
 * The retry and dead-letter queues' declaration: the arguments of each retry queue type, and a
 * declaration conflict (RabbitMQ's 406) reported as an `InvalidOptionsError` naming the options.
 */
import { describe, expect, it } from 'vitest';
import type { AmqpConfirmChannel } from '../../../src/amqp/amqp-types.js';
import { declareQueues, retryQueueArguments, retryQueueType } from '../../../src/amqp/declare.js';
import { InvalidOptionsError } from '../../../src/index.js';

const names = { queue: 'orders', retryQueue: 'orders.retry', deadLetterQueue: 'orders.dlq' };

// amqplib's error for a redeclaration with other arguments.
const preconditionFailed = () =>
  Object.assign(
    new Error(
      "Operation failed: QueueDeclare; 406 (PRECONDITION-FAILED) with message \"PRECONDITION_FAILED - inequivalent arg 'x-queue-type' for queue 'orders.retry' in vhost '/': received the value 'quorum' of type 'longstr' but current is none\"",
    ),
    { code: 406 },
  );

function channelFailing(queue: string, error: unknown) {
  const declared: Array<{ queue: string; options: unknown }> = [];
  const channel = {
    assertQueue: async (name: string, options: unknown) => {
      if (name === queue) throw error;
      declared.push({ queue: name, options });
      return {};
    },
  } as unknown as AmqpConfirmChannel;
  return { channel, declared };
}

describe('amqp retry queue declaration', () => {
  it('declares the classic retry queue as every earlier version did', () => {
    expect(retryQueueArguments('orders', 'classic')).toEqual({
      'x-dead-letter-exchange': '',
      'x-dead-letter-routing-key': 'orders',
    });
  });

  it('declares the quorum retry queue with at-least-once dead-lettering and reject-publish', () => {
    expect(retryQueueArguments('orders', 'quorum')).toEqual({
      'x-dead-letter-exchange': '',
      'x-dead-letter-routing-key': 'orders',
      'x-queue-type': 'quorum',
      'x-dead-letter-strategy': 'at-least-once',
      'x-overflow': 'reject-publish',
    });
  });

  it.each([
    [undefined, 'classic'],
    [null, 'classic'],
    ['classic', 'classic'],
    ['quorum', 'quorum'],
  ])('reads retryQueueType %s as %s', (value, type) => {
    expect(retryQueueType(value)).toBe(type);
  });

  it.each([['stream'], ['Quorum'], [''], [true], [1]])('refuses retryQueueType %s', (value) => {
    expect(() => retryQueueType(value)).toThrow(InvalidOptionsError);
    expect(() => retryQueueType(value)).toThrow(/retryQueueType: must be 'classic' or 'quorum'/);
  });

  it('reports a conflict on the retry queue naming retryQueueType and declare: false', async () => {
    const error = preconditionFailed();
    const { channel } = channelFailing('orders.retry', error);
    const declared = declareQueues(channel, names, 'quorum');
    await expect(declared).rejects.toBeInstanceOf(InvalidOptionsError);
    await expect(declared).rejects.toThrow(/"orders\.retry".*retryQueueType 'quorum'/s);
    await expect(declared).rejects.toThrow(/declare: false/);
    await expect(declared).rejects.toThrow(/inequivalent arg 'x-queue-type'/);
    await expect(declared).rejects.toMatchObject({ cause: error });
  });

  it('reports a conflict on the dead-letter queue naming deadLetterQueue and declare: false', async () => {
    const { channel, declared } = channelFailing('orders.dlq', preconditionFailed());
    const started = declareQueues(channel, names, 'classic');
    await expect(started).rejects.toThrow(
      /deadLetterQueue: the queue "orders\.dlq".*declare: false/s,
    );
    expect(declared.map((d) => d.queue)).toEqual(['orders.retry']);
  });

  it('passes other errors through unchanged', async () => {
    const error = Object.assign(new Error('ACCESS_REFUSED'), { code: 403 });
    const { channel } = channelFailing('orders.retry', error);
    await expect(declareQueues(channel, names, 'classic')).rejects.toBe(error);
  });
});
