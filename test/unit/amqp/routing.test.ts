import { describe, expect, it } from 'vitest';
import { AckBatcher } from '../../../src/amqp/acks.js';
import { AmqpDelivery, AmqpSettler } from '../../../src/amqp/delivery.js';
import { retryOptions } from '../../../src/amqp/headers.js';
import type { AmqpConfirmChannel, AmqpMessage } from '../../../src/amqp/index.js';

// Settles nothing: only the message a delivery presents is looked at.
const channel = {} as AmqpConfirmChannel;
const settler = new AmqpSettler(channel, new AckBatcher(channel), 'q.retry', 'q.dlq');

// Delivered from the retry queue (or the dead-letter queue replayed), through the default exchange.
const fromQueue = (headers: Record<string, unknown>): AmqpMessage => ({
  content: Buffer.from('pay'),
  fields: { deliveryTag: 7, redelivered: false, exchange: '', routingKey: 'q' },
  properties: { messageId: 'k1', headers },
});

const routing = (message: AmqpMessage) => `${message.fields.exchange} ${message.fields.routingKey}`;

describe('RabbitMQ copies: the routing of the application’s publish', () => {
  it('presents a retry copy with the exchange and routing key recorded on it', () => {
    // Arrange
    const copy = fromQueue({
      'x-idempotency-delivery-id': 'p-1',
      'x-idempotency-exchange': 'payments',
      'x-idempotency-routing-key': Buffer.from('payment.refund'),
      // What RabbitMQ adds as it dead-letters the expired copy back from the retry queue.
      'x-death': [{ queue: 'q.retry', reason: 'expired', count: 1, exchange: '' }],
    });
    // Act
    const delivery = new AmqpDelivery(settler, copy);
    // Assert: and its next copy carries them on.
    expect(routing(delivery.message)).toBe('payments payment.refund');
    expect(delivery.message.fields.deliveryTag).toBe(7);
    const next = retryOptions(delivery.message, 2, 100, undefined).headers;
    expect(next?.['x-idempotency-exchange']).toBe('payments');
    expect(next?.['x-idempotency-routing-key']).toBe('payment.refund');
  });

  it('presents a replayed dead letter (no copy id) as it was delivered, and records that routing', () => {
    // Arrange: a dead letter replayed to `q` through the default exchange is a new message.
    const replayed = fromQueue({
      'x-idempotency-exchange': 'payments',
      'x-idempotency-routing-key': 'payment.refund',
    });
    // Act
    const delivery = new AmqpDelivery(settler, replayed);
    // Assert
    expect(routing(delivery.message)).toBe(' q');
    expect(retryOptions(delivery.message, 1, 100, undefined).headers).toMatchObject({
      'x-idempotency-exchange': '',
      'x-idempotency-routing-key': 'q',
    });
  });

  it('presents a retry copy of an earlier version (no routing recorded) as it was delivered', () => {
    // Arrange
    const copy = fromQueue({ 'x-idempotency-delivery-id': 'p-2' });
    // Act
    const delivery = new AmqpDelivery(settler, copy);
    // Assert
    expect(delivery.message).toBe(copy);
  });

  it.each([
    ['published to a topic exchange', 'payments', undefined],
    ['published to the queue, not back from the retry queue', '', undefined],
    ['dead-lettered back from another queue', '', [{ queue: 'q.other', reason: 'expired' }]],
    ['rejected from the retry queue, not expired', '', [{ queue: 'q.retry', reason: 'rejected' }]],
  ])('never takes the routing headers of a message %s', (_, exchange, deaths) => {
    // Arrange: a publisher allowed only `payment.capture` sets the headers of a retry copy itself.
    const forged: AmqpMessage = {
      content: Buffer.from('pay'),
      fields: { deliveryTag: 8, redelivered: false, exchange, routingKey: 'payment.capture' },
      properties: {
        headers: {
          'x-idempotency-delivery-id': 'forged',
          'x-idempotency-exchange': 'payments',
          'x-idempotency-routing-key': 'payment.refund',
          ...(deaths === undefined ? {} : { 'x-death': deaths }),
        },
      },
    };
    // Act
    const delivery = new AmqpDelivery(settler, forged);
    // Assert: the handler sees the routing the broker delivered it with.
    expect(delivery.message).toBe(forged);
    expect(routing(delivery.message)).toBe(`${exchange} payment.capture`);
  });
});
