/**
 * Where the RabbitMQ consumer's retry copies and dead letters go: to the retry or dead-letter queue only.
 * A message published with sender-selected distribution (a `CC` header naming more queues) keeps `CC` when
 * RabbitMQ delivers it, and a copy that kept it was routed to those queues again.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { memoryStore } from '../../../src/index.js';
import { AmqpQueues, waitUntil } from '../../helpers/amqp-queues.js';
import { env, requireService } from '../../helpers/env.js';

describe('amqp consumer: where copies go', () => {
  const queues = new AmqpQueues();

  beforeAll(async () => {
    await requireService('RabbitMQ', env.amqpUrl);
    await queues.open();
  });
  afterAll(() => queues.close());

  it('sends its retry copy and its dead letter to their queues only, not to the queues its CC header names', async () => {
    // Arrange: the payment was published with sender-selected distribution (`CC`), a copy for the ledger
    // too. RabbitMQ keeps `CC` on the delivered message; a copy that kept it was routed to the ledger
    // again, with this consumer's retry headers.
    const queue = await queues.queue('cc');
    const ledger = await queues.queue('cc-ledger');
    await queues.start(
      () => {
        throw new Error('card declined');
      },
      {
        queue,
        name: queue,
        idempotency: { store: memoryStore() },
        maxDeliveries: 2,
        backoff: { initial: 1000, jitter: false },
      },
    );
    // Act
    await queues.publish(queue, 'pay', { messageId: 'cc-1', headers: { CC: [ledger] } });
    await waitUntil('the retry copy', async () => (await queues.count(`${queue}.retry`)) === 1);
    const ledgerWhileRetrying = await queues.count(ledger);
    await waitUntil('the dead letter', async () => (await queues.count(`${queue}.dlq`)) === 1);
    // Assert: the ledger has the one message RabbitMQ routed to it on the publish, no copy of ours.
    expect(ledgerWhileRetrying).toBe(1);
    const copies = await queues.drain(ledger);
    expect(copies.map((copy) => Object.keys(copy.properties.headers ?? {}))).toEqual([['CC']]);
  });

  it('sends the dead letter of an original message to its queue only, not to the queues its CC header names', async () => {
    // Arrange
    const queue = await queues.queue('cc-dead');
    const ledger = await queues.queue('cc-dead-ledger');
    await queues.start(
      () => {
        throw new Error('card declined');
      },
      { queue, name: queue, idempotency: { store: memoryStore() }, maxDeliveries: 1 },
    );
    // Act
    await queues.publish(queue, 'pay', { messageId: 'cc-2', headers: { CC: [ledger] } });
    await waitUntil('the dead letter', async () => (await queues.count(`${queue}.dlq`)) === 1);
    // Assert
    expect(await queues.count(ledger)).toBe(1);
    const [letter] = await queues.drain(`${queue}.dlq`);
    expect(letter?.properties.headers?.CC).toBeUndefined();
  });
});
