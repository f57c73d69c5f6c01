/**
 * A RabbitMQ confirm channel for the consumer's unit tests: the test delivers messages and answers the
 * consumer's cancel when it chooses; acks and nacks are recorded.
 */
import { EventEmitter } from 'node:events';
import type { AmqpConfirmChannel, AmqpMessage } from '../../../src/amqp/index.js';

/** A message with delivery tag `tag` and message id `key-<tag>`. */
export const message = (tag: number): AmqpMessage => ({
  content: Buffer.from('work'),
  fields: { deliveryTag: tag, redelivered: false, exchange: '', routingKey: 'q' },
  properties: { messageId: `key-${tag}` },
});

/**
 * A channel whose `cancel` resolves only when the test calls `answerCancel`; records the tags acked (a
 * multiple ack's included) and nacked.
 */
export function fakeChannel() {
  const emitter = new EventEmitter();
  const acked: number[] = [];
  const nacked: Array<{ tag: number; requeue: boolean | undefined }> = [];
  const control = {
    deliver: (_message: AmqpMessage | null) => {},
    answerCancel: () => {},
  };
  const channel = Object.assign(emitter, {
    waitForConfirms: async () => {},
    checkQueue: async () => ({}),
    checkExchange: async () => ({}),
    assertQueue: async () => ({}),
    prefetch: async () => ({}),
    consume: async (_queue: string, onMessage: (message: AmqpMessage | null) => void) => {
      control.deliver = onMessage;
      return { consumerTag: 'ctag' };
    },
    cancel: () =>
      new Promise<void>((resolve) => {
        control.answerCancel = resolve;
      }),
    // A multiple ack settles every tag up to its own (the tests deliver tags 1, 2, 3, …).
    ack: (m: AmqpMessage, allUpTo = false) => {
      const tag = m.fields.deliveryTag;
      for (let t = allUpTo ? 1 : tag; t <= tag; t++) if (!acked.includes(t)) acked.push(t);
    },
    nack: (m: AmqpMessage, _allUpTo?: boolean, requeue?: boolean) =>
      void nacked.push({ tag: m.fields.deliveryTag, requeue }),
    sendToQueue: () => true,
  }) as unknown as AmqpConfirmChannel;
  return { channel, control, acked, nacked };
}
