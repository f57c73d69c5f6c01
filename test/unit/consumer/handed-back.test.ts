/**
 * Deliveries handed back without running (the NATS consumer's `nak()` of a message that waited behind
 * stuck slots) are recorded in the store and not counted against `maxDeliveries`: a message whose handler
 * fails is dead-lettered only once it has run `maxDeliveries` times, never earlier because of hand-backs.
 */
import { describe, expect, it } from 'vitest';
import {
  type DeadLetter,
  type Delivery,
  processDelivery,
  recordHandedBack,
  resolveConsumerOptions,
} from '../../../src/consumer/index.js';
import { createIdempotency, memoryStore } from '../../../src/index.js';

type Message = { id: string };

function delivery(deliveryCount: number, mayHandBack = true) {
  const actions: string[] = [];
  const value: Delivery<Message> = {
    message: { id: 'k1' },
    deliveryCount,
    brokerId: 'ORDERS:7:1',
    mayHandBack,
    ack: () => void actions.push('ack'),
    retry: (delayMs) => void actions.push(`retry ${delayMs}`),
    deadLetter: (letter: DeadLetter) => void actions.push(`dead_letter #${letter.deliveryCount}`),
  };
  return { delivery: value, actions };
}

function setup() {
  const idempotency = createIdempotency({ store: memoryStore() });
  const options = resolveConsumerOptions<Message>(
    { idempotency, name: 'billing', maxDeliveries: 2, backoff: (count) => count * 100 },
    (m) => m.id,
  );
  return { options };
}

const failing = () => {
  throw new Error('gateway timeout');
};

describe('deliveries handed back without running', () => {
  it('are not counted: a failure on delivery 2 after a hand-back is retried, with the backoff of run 1', async () => {
    // Arrange: delivery 1 was handed back; two deliveries allowed.
    const { options } = setup();
    await recordHandedBack(options, 'ORDERS:7:1', 1);
    const second = delivery(2);
    // Act
    await processDelivery(options, failing, second.delivery);
    // Assert
    expect(second.actions).toEqual(['retry 100']);
  });

  it('still dead-letter once the handler has run maxDeliveries times, with the real count', async () => {
    // Arrange
    const { options } = setup();
    await recordHandedBack(options, 'ORDERS:7:1', 1);
    const third = delivery(3);
    // Act: runs on deliveries 2 and 3.
    await processDelivery(options, failing, third.delivery);
    // Assert
    expect(third.actions).toEqual(['dead_letter #3']);
  });

  it('are counted as before for an adapter that does not hand messages back', async () => {
    // Arrange
    const { options } = setup();
    await recordHandedBack(options, 'ORDERS:7:1', 1);
    const second = delivery(2, false);
    // Act
    await processDelivery(options, failing, second.delivery);
    // Assert
    expect(second.actions).toEqual(['dead_letter #2']);
  });

  it('do not credit another message, nor another delivery of this one', async () => {
    // Arrange: records for another message, and for delivery 2 (this one, which did run).
    const { options } = setup();
    await recordHandedBack(options, 'ORDERS:8:1', 1);
    await recordHandedBack(options, 'ORDERS:7:1', 2);
    const second = delivery(2);
    // Act
    await processDelivery(options, failing, second.delivery);
    // Assert
    expect(second.actions).toEqual(['dead_letter #2']);
  });
});
