import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import { AckBatcher } from '../../../src/amqp/acks.js';
import { AmqpDelivery, AmqpSettler } from '../../../src/amqp/delivery.js';
import { deadLetterOptions, retryOptions } from '../../../src/amqp/headers.js';
import type { AmqpConfirmChannel, AmqpMessage } from '../../../src/amqp/index.js';
import { amqpQueues } from '../../../src/amqp/queues.js';
import type { DeadLetter } from '../../../src/consumer/index.js';
import { isInvalidOptionsError } from '../../../src/index.js';

const letter: DeadLetter = {
  consumer: 'billing',
  key: 'k1',
  reason: 'handler_error',
  error: { name: 'Error', message: 'boom' },
  deliveryCount: 5,
  failedAt: '2026-01-01T00:00:00.000Z',
};

const message = (headers: Record<string, unknown> = {}): AmqpMessage => ({
  content: Buffer.from('body'),
  fields: { deliveryTag: 1, redelivered: false, exchange: '', routingKey: 'q' },
  properties: { messageId: 'k1', headers },
});

/**
 * A confirm channel that, like RabbitMQ, emits `'return'` for a copy to a queue it does not know, before
 * confirming it; and records acks.
 */
function fakeBroker(queues: string[]) {
  const emitter = new EventEmitter();
  const acked: number[] = [];
  const channel = Object.assign(emitter, {
    sendToQueue(
      queue: string,
      content: Buffer,
      options: { headers?: Record<string, unknown>; mandatory?: boolean },
      callback: (error: unknown, ok: unknown) => void,
    ) {
      if (!queues.includes(queue) && options.mandatory) {
        const fields = { replyCode: 312, replyText: 'NO_ROUTE', exchange: '', routingKey: queue };
        emitter.emit('return', { content, fields, properties: { headers: options.headers } });
      }
      setImmediate(() => callback(null, undefined));
      return true;
    },
    ack: (m: AmqpMessage) => void acked.push(m.fields.deliveryTag),
  }) as unknown as AmqpConfirmChannel;
  const settler = new AmqpSettler(channel, new AckBatcher(channel), 'q.retry', 'q.dlq');
  channel.on('return', settler.returns.listener);
  return { settler, acked };
}

describe('RabbitMQ copies', () => {
  it('fails a copy the broker returned, naming its queue, and does not ack the original', async () => {
    // Arrange
    const { settler, acked } = fakeBroker(['q.dlq']);
    const delivery = new AmqpDelivery(settler, message());
    // Act
    const failure = await delivery.retry(100).catch((error: unknown) => error);
    // Assert
    expect(failure).toMatchObject({ name: 'UnroutableCopyError', queue: 'q.retry' });
    expect(String((failure as Error).message)).toContain('"q.retry"');
    expect(acked).toEqual([]);
  });

  it('acks the original once a routed copy is confirmed', async () => {
    // Arrange
    const { settler, acked } = fakeBroker(['q.retry', 'q.dlq']);
    const delivery = new AmqpDelivery(settler, message());
    // Act
    await delivery.deadLetter(letter);
    // Assert
    expect(acked).toEqual([1]);
  });

  it('records a dead letter’s deliveries under their own header, so a replay counts afresh', () => {
    // Arrange
    const retried = message({ 'x-idempotency-deliveries': 4, 'x-idempotency-copy-id': 'a-1' });
    // Act
    const headers = deadLetterOptions(retried, letter).headers ?? {};
    const replayed = new AmqpDelivery(fakeBroker([]).settler, message(headers));
    // Assert
    expect(headers['x-idempotency-deliveries']).toBeUndefined();
    expect(headers['x-idempotency-dead-letter-deliveries']).toBe(5);
    expect(headers['x-idempotency-copy-id']).toBeUndefined();
    expect(replayed.deliveryCount).toBe(1);
  });

  it('carries a pending dead letter on a retry copy, and reads it back; never further', () => {
    // Arrange / Act
    const copy = retryOptions(message(), 5, 30_000, letter);
    const redelivered = new AmqpDelivery(fakeBroker([]).settler, message(copy.headers));
    const dead = deadLetterOptions(message(copy.headers), letter);
    const plainRetry = retryOptions(message(copy.headers), 6, 100, undefined);
    // Assert
    expect(redelivered.pendingDeadLetter).toEqual(letter);
    expect(dead.headers?.['x-idempotency-pending-dead-letter']).toBeUndefined();
    expect(plainRetry.headers?.['x-idempotency-pending-dead-letter']).toBeUndefined();
  });

  it('gives each retry copy an identity of its own, read back on its redelivery, never carried further', () => {
    // Arrange / Act
    const copy = retryOptions(message(), 1, 100, undefined);
    const next = retryOptions(message(copy.headers), 2, 100, undefined);
    const dead = deadLetterOptions(message(copy.headers), letter);
    const delivered = new AmqpDelivery(fakeBroker([]).settler, message(copy.headers));
    const requeued = new AmqpDelivery(fakeBroker([]).settler, {
      ...message(copy.headers),
      fields: { deliveryTag: 2, redelivered: true, exchange: '', routingKey: 'q' },
    });
    const original = new AmqpDelivery(fakeBroker([]).settler, message());
    // Assert
    const id = copy.headers?.['x-idempotency-delivery-id'];
    expect(typeof id).toBe('string');
    expect(next.headers?.['x-idempotency-delivery-id']).not.toBe(id);
    expect(dead.headers?.['x-idempotency-delivery-id']).toBeUndefined();
    expect(delivered).toMatchObject({ brokerId: id, firstDelivery: true });
    expect(requeued).toMatchObject({ brokerId: id, firstDelivery: false });
    expect(original.brokerId).toBeUndefined();
  });

  it('ignores a pending dead letter header that is not a whole letter', () => {
    // Arrange
    const headers = { 'x-idempotency-pending-dead-letter': '{"consumer":"billing"}' };
    // Act
    const delivery = new AmqpDelivery(fakeBroker([]).settler, message(headers));
    // Assert
    expect(delivery.pendingDeadLetter).toBeUndefined();
  });
});

describe('RabbitMQ queue options', () => {
  const invalid = (options: Parameters<typeof amqpQueues>[0]) => {
    try {
      amqpQueues(options, 10);
    } catch (error) {
      return isInvalidOptionsError(error) ? error.message : `other: ${String(error)}`;
    }
    return 'accepted';
  };

  it('refuses a prefetch outside 1–65535, before any channel call', () => {
    // Arrange / Act / Assert
    expect(invalid({ queue: 'q', prefetch: 70_000 })).toMatch(/^prefetch: .*65535/);
    expect(invalid({ queue: 'q', prefetch: 0 })).toMatch(/^prefetch:/);
    expect(amqpQueues({ queue: 'q', prefetch: 65_535 }, 10).prefetch).toBe(65_535);
  });

  it('refuses a retry or dead-letter queue that is the consumed queue, or each other', () => {
    // Arrange / Act / Assert
    expect(invalid({ queue: 'q', retryQueue: 'q' })).toMatch(/^retryQueue:/);
    expect(invalid({ queue: 'q', deadLetterQueue: 'q' })).toMatch(/^deadLetterQueue:/);
    expect(invalid({ queue: 'q', retryQueue: 'x', deadLetterQueue: 'x' })).toMatch(
      /^deadLetterQueue:/,
    );
    expect(invalid({ queue: 'q', retryQueue: '' })).toMatch(/^retryQueue:/);
  });

  it('defaults the retry and dead-letter queues and the prefetch', () => {
    // Arrange / Act
    const queues = amqpQueues({ queue: 'orders' }, 7);
    // Assert
    expect(queues).toEqual({
      queue: 'orders',
      retryQueue: 'orders.retry',
      deadLetterQueue: 'orders.dlq',
      prefetch: 7,
    });
  });
});
