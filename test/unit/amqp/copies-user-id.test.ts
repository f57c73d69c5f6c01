/**
 * The `user-id` property of a message another RabbitMQ user published: RabbitMQ validates it on every
 * publish against the user the connection logged in as, so a copy that kept it made RabbitMQ close the
 * consumer's channel (PRECONDITION_FAILED); the message came back and ran again, without end. Measured on
 * RabbitMQ 3.10 with a second user (it takes `rabbitmqctl add_user`, which the integration tests do not
 * do): a handler failing with `maxDeliveries: 3` ran 5 times over 5 channels, never dead-lettered.
 */
import { describe, expect, it } from 'vitest';
import { deadLetterOptions, retryOptions, USER_ID_HEADER } from '../../../src/amqp/headers.js';
import type { AmqpMessage } from '../../../src/amqp/index.js';
import type { DeadLetter } from '../../../src/consumer/index.js';

const letter: DeadLetter = {
  consumer: 'billing',
  key: 'k1',
  reason: 'handler_error',
  error: { name: 'Error', message: 'declined' },
  deliveryCount: 3,
  failedAt: '2026-01-01T00:00:00.000Z',
};

/** A message the user `orders-api` published with its validated `user-id`. */
const published = (headers: Record<string, unknown> = {}): AmqpMessage => ({
  content: Buffer.from('pay'),
  fields: { deliveryTag: 1, redelivered: false, exchange: '', routingKey: 'q' },
  properties: { messageId: 'k1', userId: 'orders-api', headers },
});

describe('RabbitMQ copies of a message with a user-id', () => {
  it('publish retry copies and dead letters without the user-id property, which the consumer cannot claim', () => {
    // Act
    const retry = retryOptions(published(), 1, 100, undefined) as Record<string, unknown>;
    const dead = deadLetterOptions(published(), letter) as Record<string, unknown>;
    // Assert
    expect(retry.userId).toBeUndefined();
    expect(dead.userId).toBeUndefined();
    expect(retry.messageId).toBe('k1');
  });

  it('keep who published the original in a header, through every later copy', () => {
    // Act
    const retry = retryOptions(published(), 1, 100, undefined);
    const fromCopy = { ...published(retry.headers), properties: { headers: retry.headers } };
    const dead = deadLetterOptions(fromCopy, letter);
    // Assert
    expect(retry.headers?.[USER_ID_HEADER]).toBe('orders-api');
    expect(dead.headers?.[USER_ID_HEADER]).toBe('orders-api');
  });
});
