/**
 * Dead letters that could not be written, recorded in the store for brokers whose redelivery cannot carry
 * one (NATS, Redis Streams: `Delivery.brokerId`). The redelivery of that message writes the letter again
 * without running the handler; another message, even with the same key, is not touched by the record.
 */
import { describe, expect, it } from 'vitest';
import { deadLetterScope } from '../../../src/consumer/given-up.js';
import {
  type DeadLetter,
  type Delivery,
  processDelivery,
  resolveConsumerOptions,
} from '../../../src/consumer/index.js';
import { createIdempotency, memoryStore } from '../../../src/index.js';

/** A payment instruction, keyed by its id. */
type Message = { id: string };

/** A delivery of message `brokerId` whose dead letter fails while `broken.value` is true. */
function delivery(brokerId: string, deliveryCount: number, broken: { value: boolean }) {
  const written: DeadLetter[] = [];
  const retries: number[] = [];
  const value: Delivery<Message> = {
    message: { id: 'k1' },
    deliveryCount,
    brokerId,
    ack: () => {},
    retry: (delayMs) => void retries.push(delayMs),
    deadLetter: (letter) => {
      if (broken.value) throw new Error('DLQ broken');
      written.push(letter);
    },
  };
  return { delivery: value, written, retries };
}

function setup() {
  const idempotency = createIdempotency({ store: memoryStore() });
  const options = resolveConsumerOptions<Message>(
    { idempotency, name: 'billing', maxDeliveries: 2, backoff: () => 10 },
    (m) => m.id,
  );
  return { idempotency, options };
}

describe('dead letters recorded for the redelivery', () => {
  it('writes the recorded letter again on a redelivery, without running the handler', async () => {
    // Arrange: the handler fails on the last delivery, and the DLQ is broken.
    const { options } = setup();
    const broken = { value: true };
    let runs = 0;
    const handler = () => {
      runs++;
      throw new Error(`boom ${runs}`);
    };
    const last = delivery('orders:7', 2, broken);
    await processDelivery(options, handler, last.delivery);
    // Act: two redeliveries while broken, then one once it works.
    const third = delivery('orders:7', 3, broken);
    await processDelivery(options, handler, third.delivery);
    broken.value = false;
    const fourth = delivery('orders:7', 4, broken);
    const decision = await processDelivery(options, handler, fourth.delivery);
    // Assert
    expect(runs).toBe(1);
    expect(last.retries).toEqual([30_000]);
    expect(third.retries).toEqual([30_000]);
    expect(decision).toMatchObject({ action: 'dead_letter', reason: 'handler_error' });
    expect(fourth.written).toMatchObject([
      { key: 'k1', deliveryCount: 2, error: { message: 'boom 1' } },
    ]);
  });

  it('does not apply the record to another message with the same key', async () => {
    // Arrange: message orders:7 given up on with a broken DLQ; message orders:9 has the same key.
    const { options } = setup();
    const broken = { value: true };
    await processDelivery(
      options,
      () => {
        throw new Error('boom');
      },
      delivery('orders:7', 2, broken).delivery,
    );
    let runs = 0;
    // Act: orders:9's second delivery (a retry of its own).
    const other = delivery('orders:9', 2, { value: false });
    const decision = await processDelivery(options, () => void runs++, other.delivery);
    // Assert
    expect(runs).toBe(1);
    expect(decision).toEqual({ action: 'ack', reason: 'executed' });
  });

  it('records under a scope no consumer key shares', async () => {
    // Arrange
    const { options, idempotency } = setup();
    await processDelivery(
      options,
      () => {
        throw new Error('boom');
      },
      delivery('orders:7', 2, { value: true }).delivery,
    );
    // Act
    const recorded = await idempotency.inspect('orders:7', deadLetterScope('billing'));
    const key = await idempotency.inspect('k1', options.scope);
    // Assert: the letter is recorded; the message's own key was released, as for any handler error.
    expect(recorded.state).toBe('completed');
    expect(key.state).toBe('absent');
    expect(deadLetterScope('billing')).not.toMatch(/^consumer:/);
  });
  it('records a letter written on its first try, so a redelivery after a lost settle never runs the handler', async () => {
    // Arrange: the last allowed delivery fails and its letter is written; its settle (the term or XACK
    // after the write) is then lost, and the broker delivers the message again.
    const { options } = setup();
    const broken = { value: false };
    let runs = 0;
    const handler = () => {
      runs++;
      throw new Error('card declined');
    };
    const last = delivery('stream:1', 2, broken);
    await processDelivery(options, handler, last.delivery);
    // Act
    const after = delivery('stream:1', 3, broken);
    await processDelivery(options, handler, after.delivery);
    // Assert: the letter written again, the same one, and the handler run once in all.
    expect(runs).toBe(1);
    expect(last.written).toHaveLength(1);
    expect(after.written).toEqual(last.written);
  });

  it('reads no record for a delivery the broker marks as the first (RabbitMQ retry copy)', async () => {
    // Arrange: a store whose reads are counted; the copy counts earlier deliveries, but was never delivered.
    const store = memoryStore();
    let reads = 0;
    const get = store.get.bind(store);
    store.get = (...args) => {
      reads++;
      return get(...args);
    };
    const inspect = store.inspect?.bind(store);
    if (inspect !== undefined) {
      store.inspect = (...args) => {
        reads++;
        return inspect(...args);
      };
    }
    const options = resolveConsumerOptions<Message>(
      { idempotency: createIdempotency({ store }), name: 'billing', maxDeliveries: 5 },
      (m) => m.id,
    );
    const copy = delivery('copy-1', 3, { value: false });
    copy.delivery.firstDelivery = true;
    // Act
    await processDelivery(options, () => {}, copy.delivery);
    // Assert: the claim and completion only, no dead-letter lookup.
    expect(reads).toBe(0);
  });
});
