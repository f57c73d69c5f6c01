/**
 * How a dead letter's write is reported, whatever the broker: `onDeadLetter` once per letter written. A
 * write that finds its message settled by another delivery (`NOT_WRITTEN`, Redis Streams) is a duplicate;
 * a write given up on (`brokerTimeout`) that lands later is reported then, and only if it wrote.
 */
import { describe, expect, it } from 'vitest';
import {
  type Delivery,
  NOT_WRITTEN,
  processDelivery,
  resolveConsumerOptions,
} from '../../../src/consumer/index.js';
import { createIdempotency, memoryStore } from '../../../src/index.js';

interface Message {
  id?: string;
}

/** Dead-letters a message without a key, its write answering `answer`; the hooks called, in order. */
async function deadLetterAnswering(answer: Promise<typeof NOT_WRITTEN | undefined>) {
  const hooks: string[] = [];
  const options = resolveConsumerOptions<Message>(
    {
      idempotency: createIdempotency({ store: memoryStore() }),
      name: 'billing',
      brokerTimeout: '20ms',
      hooks: {
        onDeadLetter: () => void hooks.push('dead_letter'),
        onDuplicate: () => void hooks.push('duplicate'),
        onBrokerError: (event) => void hooks.push(`broker_error:${event.operation}`),
      },
    },
    (message) => message.id,
  );
  const delivery: Delivery<Message> = {
    message: {},
    deliveryCount: 1,
    ack: () => {},
    retry: () => {},
    deadLetter: () => answer,
  };
  await processDelivery(options, () => {}, delivery);
  return hooks;
}

/** A write that answers when the test says. */
function heldWrite<T>() {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

const tick = () => new Promise((resolve) => setTimeout(resolve, 5));

describe('dead letter reports', () => {
  it('reports a write that found its message settled before as a duplicate, not a letter', async () => {
    // Act
    const hooks = await deadLetterAnswering(Promise.resolve(NOT_WRITTEN));
    // Assert
    expect(hooks).toEqual(['duplicate']);
  });

  it('reports a letter written after it was given up on once it lands, once', async () => {
    // Arrange
    const write = heldWrite<undefined>();
    const hooks = await deadLetterAnswering(write.promise);
    expect(hooks).toEqual(['broker_error:dead_letter']);
    // Act
    write.resolve(undefined);
    await tick();
    // Assert
    expect(hooks).toEqual(['broker_error:dead_letter', 'dead_letter']);
  });

  it('says nothing more of a late write that wrote nothing, or failed', async () => {
    // Arrange
    const unwritten = heldWrite<typeof NOT_WRITTEN | undefined>();
    const failed = heldWrite<undefined>();
    const first = await deadLetterAnswering(unwritten.promise);
    const second = await deadLetterAnswering(failed.promise);
    // Act
    unwritten.resolve(NOT_WRITTEN);
    failed.reject(new Error('connection lost'));
    await tick();
    // Assert
    expect(first).toEqual(['broker_error:dead_letter']);
    expect(second).toEqual(['broker_error:dead_letter']);
  });
});
