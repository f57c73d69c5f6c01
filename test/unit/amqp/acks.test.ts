import { describe, expect, it } from 'vitest';
import { AckBatcher } from '../../../src/amqp/acks.js';
import type { AmqpConfirmChannel, AmqpMessage } from '../../../src/amqp/index.js';

/** A channel that records acks, and a message with a given delivery tag. */
function fakeChannel(options: { closed?: boolean } = {}) {
  const acks: Array<{ tag: number; multiple: boolean }> = [];
  const channel = {
    ack(message: AmqpMessage, allUpTo = false) {
      if (options.closed) throw new Error('Channel closed');
      acks.push({ tag: message.fields.deliveryTag, multiple: allUpTo });
    },
  } as unknown as AmqpConfirmChannel;
  return { channel, acks };
}

const message = (tag: number): AmqpMessage => ({
  content: Buffer.from(''),
  fields: { deliveryTag: tag, redelivered: false, exchange: '', routingKey: 'q' },
  properties: {},
});

function deliver(batcher: AckBatcher, tags: number[]): Map<number, AmqpMessage> {
  const messages = new Map<number, AmqpMessage>();
  for (const tag of tags) {
    const m = message(tag);
    messages.set(tag, m);
    batcher.delivered(m);
  }
  return messages;
}

describe('AckBatcher', () => {
  it('sends the acks of one turn as a single multiple ack when they are a prefix of the deliveries', async () => {
    // Arrange
    const { channel, acks } = fakeChannel();
    const batcher = new AckBatcher(channel);
    const messages = deliver(batcher, [1, 2, 3, 4]);
    // Act
    await Promise.all([3, 1, 4, 2].map((tag) => batcher.ack(messages.get(tag)!)));
    // Assert
    expect(acks).toEqual([{ tag: 4, multiple: true }]);
  });

  it('never covers a delivery still being processed: acks above it go one by one', async () => {
    // Arrange
    const { channel, acks } = fakeChannel();
    const batcher = new AckBatcher(channel);
    const messages = deliver(batcher, [1, 2, 3, 4, 5]);
    // Act: 3 is still running
    await Promise.all([1, 2, 4, 5].map((tag) => batcher.ack(messages.get(tag)!)));
    await batcher.ack(messages.get(3)!);
    // Assert
    expect(acks).toEqual([
      { tag: 4, multiple: false },
      { tag: 5, multiple: false },
      { tag: 2, multiple: true },
      { tag: 3, multiple: true },
    ]);
  });

  it('falls back to single acks for good once a delivery tag is missing (another consumer on the channel)', async () => {
    // Arrange
    const { channel, acks } = fakeChannel();
    const batcher = new AckBatcher(channel);
    const messages = deliver(batcher, [1, 2, 4]); // tag 3 went elsewhere
    // Act
    await Promise.all([1, 2, 4].map((tag) => batcher.ack(messages.get(tag)!)));
    // Assert
    expect(acks).toEqual([
      { tag: 1, multiple: false },
      { tag: 2, multiple: false },
      { tag: 4, multiple: false },
    ]);
  });

  it('uses single acks when the first delivery is not tag 1 (the channel was used before)', async () => {
    // Arrange
    const { channel, acks } = fakeChannel();
    const batcher = new AckBatcher(channel);
    const messages = deliver(batcher, [7, 8]);
    // Act
    await Promise.all([7, 8].map((tag) => batcher.ack(messages.get(tag)!)));
    // Assert
    expect(acks).toEqual([
      { tag: 7, multiple: false },
      { tag: 8, multiple: false },
    ]);
  });

  it('keeps acking one by one above a message that is never acked', async () => {
    // Arrange
    const { channel, acks } = fakeChannel();
    const batcher = new AckBatcher(channel);
    const messages = deliver(batcher, [1, 2, 3]);
    // Act: 1 is abandoned (its retry copy could not be published)
    await batcher.ack(messages.get(2)!);
    await batcher.ack(messages.get(3)!);
    // Assert
    expect(acks).toEqual([
      { tag: 2, multiple: false },
      { tag: 3, multiple: false },
    ]);
  });

  it('rejects every ack of the turn when the channel refuses them', async () => {
    // Arrange
    const { channel } = fakeChannel({ closed: true });
    const batcher = new AckBatcher(channel);
    const messages = deliver(batcher, [1, 2]);
    // Act
    const results = await Promise.allSettled([1, 2].map((tag) => batcher.ack(messages.get(tag)!)));
    // Assert
    expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected']);
  });
});
