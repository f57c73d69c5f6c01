import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type AmqpConsumerOptions,
  type AmqpMessage,
  idempotentConsumer,
} from '../../../src/amqp/index.js';
import { memoryStore } from '../../../src/index.js';
import { proxiedAmqpChannels } from '../../helpers/amqp-proxied.js';
import { AmqpQueues, waitUntil } from '../../helpers/amqp-queues.js';
import { env, requireService } from '../../helpers/env.js';
import type { TcpProxy } from '../../helpers/tcp-proxy.js';

describe('amqp consumer: a dead letter written into a cut link', () => {
  const queues = new AmqpQueues();
  const channels = proxiedAmqpChannels();

  beforeAll(async () => {
    await requireService('RabbitMQ', env.amqpUrl);
    await queues.open();
  });
  afterAll(async () => {
    await channels.close();
    await queues.close();
  });

  /** A confirm channel on a connection through a new proxy. */
  const proxiedChannel = () => channels.open();

  /**
   * One message whose handler always fails, with `maxDeliveries`; the link is cut as the last allowed run
   * fails, so its dead letter goes into the void, then restored (the broker requeues the message) and a
   * second consumer on a direct connection goes on.
   */
  async function deadLetterIntoACut(name: string, maxDeliveries: number) {
    const queue = await queues.queue(name);
    const store = memoryStore();
    let runs = 0;
    let proxy: TcpProxy | undefined;
    const handler = async (_message: AmqpMessage) => {
      runs++;
      if (runs === maxDeliveries) proxy?.cut();
      throw new Error('declined for good');
    };
    const brokerErrors: string[] = [];
    const options: AmqpConsumerOptions = {
      queue,
      name: queue,
      idempotency: { store },
      maxDeliveries,
      backoff: () => 50,
      minRetryDelay: '50ms',
      maxRetryDelay: '100ms',
      hooks: { onBrokerError: (event) => brokerErrors.push(event.operation) },
    };
    const proxied = await proxiedChannel();
    proxy = proxied.proxy;
    const first = await idempotentConsumer(proxied.channel, handler, options);
    await queues.publish(queue, 'payment', { messageId: `${name}-1` });
    await waitUntil('the last allowed run', () => runs === maxDeliveries);
    // The dead letter (and anything after it) goes into the cut link.
    await new Promise((resolve) => setTimeout(resolve, 300));
    proxy.restore();
    await first.done;
    const second = await queues.start(handler, options);
    await waitUntil('the dead letter', async () => (await queues.count(`${queue}.dlq`)) === 1);
    await waitUntil('the queues to empty', async () => {
      const counts = await Promise.all([queue, `${queue}.retry`].map((q) => queues.count(q)));
      return counts.every((count) => count === 0);
    });
    await new Promise((resolve) => setTimeout(resolve, 300));
    await second.close();
    const letters = await queues.drain(`${queue}.dlq`);
    return { runs, letters, brokerErrors };
  }

  it('a retry copy: its redelivery writes the recorded dead letter without running the handler', async () => {
    const { runs, letters } = await deadLetterIntoACut('dl-cut-copy', 3);

    expect(runs).toBe(3);
    expect(letters).toHaveLength(1);
    const headers = letters[0]?.properties.headers ?? {};
    expect(String(headers['x-idempotency-dead-letter-reason'])).toBe('handler_error');
    expect(Number(headers['x-idempotency-dead-letter-deliveries'])).toBe(3);
    // A replay of the dead letter is a new message: it does not carry the copy's identity.
    expect(headers['x-idempotency-delivery-id']).toBeUndefined();
  });

  it('the original message (maxDeliveries 1) has no identity across redeliveries: it runs once more, then is dead-lettered', async () => {
    const { runs, letters } = await deadLetterIntoACut('dl-cut-original', 1);

    // As documented: the requeued original is delivered with the redelivered flag (deliveries 2), runs
    // again, and is dead-lettered; never lost.
    expect(runs).toBe(2);
    expect(letters).toHaveLength(1);
    expect(Number(letters[0]?.properties.headers?.['x-idempotency-dead-letter-deliveries'])).toBe(
      2,
    );
  });
});
