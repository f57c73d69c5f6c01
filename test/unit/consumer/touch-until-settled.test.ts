/**
 * `Delivery.touchUntilSettled` (Redis Streams, NATS): the broker's timer is kept alive past the execution,
 * until the decision has been carried out: an ack, or a dead letter with its record in the store, that
 * takes longer than the timer must not let the broker hand the message to another consumer meanwhile.
 * Stopped before a retry, which sets the timer itself. Without the flag, the touches stop as the execution
 * settles, as before.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import {
  DeadLetterReason,
  type Delivery,
  describeError,
  processDelivery,
  resolveConsumerOptions,
} from '../../../src/consumer/index.js';
import { createIdempotency, memoryStore, type Store } from '../../../src/index.js';

interface Message {
  id: string;
}

/**
 * A delivery (`touchUntilSettled` as given) whose every settle call takes 100 ms, noting the touches made
 * when the handler ended, when a settle call began and when it ended.
 */
function slowSettleDelivery(touchUntilSettled: boolean, deliveryCount = 1) {
  const seen = { touches: 0, atHandlerEnd: -1, atSettleStart: -1, atSettleEnd: -1, settled: '' };
  const settling = (what: string) => async () => {
    seen.settled = what;
    seen.atSettleStart = seen.touches;
    await sleep(100);
    seen.atSettleEnd = seen.touches;
  };
  const delivery: Delivery<Message> = {
    message: { id: 'k1' },
    deliveryCount,
    // Each dead letter is recorded under it before it is written.
    brokerId: 'stream:1-0',
    touchUntilSettled,
    ack: settling('ack'),
    retry: settling('retry'),
    deadLetter: settling('dead-letter'),
    touch: () => void seen.touches++,
    touchIntervalMs: 10,
  };
  return { delivery, seen };
}

function consumerOptions(store: Store = memoryStore()) {
  return resolveConsumerOptions<Message>(
    {
      // One store call each (no batches): the test slows `claim` itself.
      idempotency: createIdempotency({ store, leaseMs: 5000, batch: false }),
      name: 'billing',
      maxDeliveries: 2,
    },
    (message) => message.id,
  );
}

describe('keeping a delivery alive until its decision is carried out (touchUntilSettled)', () => {
  it('touches through a slow ack, and stops once it is done', async () => {
    // Arrange
    const { delivery, seen } = slowSettleDelivery(true);
    // Act
    await processDelivery(consumerOptions(), () => {}, delivery);
    await sleep(50);
    // Assert: touched during the 100 ms ack (before: none), none after.
    expect(seen.settled).toBe('ack');
    expect(seen.atSettleEnd - seen.atSettleStart).toBeGreaterThanOrEqual(3);
    expect(seen.touches).toBe(seen.atSettleEnd);
  });

  it('touches while a dead letter is recorded in a slow store and written', async () => {
    // Arrange: the second delivery of a message whose handler fails (maxDeliveries 2); the store takes
    // 100 ms to record the letter (its claim of the record's key).
    const store = memoryStore();
    const claim = store.claim.bind(store);
    let handlerDone = false;
    store.claim = async (...args) => {
      if (handlerDone) await sleep(100);
      return claim(...args);
    };
    const { delivery, seen } = slowSettleDelivery(true, 2);
    // Act
    await processDelivery(
      consumerOptions(store),
      () => {
        handlerDone = true;
        seen.atHandlerEnd = seen.touches;
        throw new Error('card declined');
      },
      delivery,
    );
    await sleep(50);
    // Assert: touched during the record (before the write began) and the write; none after.
    expect(seen.settled).toBe('dead-letter');
    expect(seen.atSettleStart - seen.atHandlerEnd).toBeGreaterThanOrEqual(3);
    expect(seen.atSettleEnd - seen.atSettleStart).toBeGreaterThanOrEqual(3);
    expect(seen.touches).toBe(seen.atSettleEnd);
  });

  it('stops touching before a retry', async () => {
    // Arrange: a first delivery whose handler fails after 50 ms (touched meanwhile).
    const { delivery, seen } = slowSettleDelivery(true);
    // Act
    await processDelivery(
      consumerOptions(),
      async () => {
        await sleep(50);
        seen.atHandlerEnd = seen.touches;
        throw new Error('card declined');
      },
      delivery,
    );
    await sleep(50);
    // Assert: no touch from the retry's start on (it set the broker's timer for the redelivery).
    expect(seen.settled).toBe('retry');
    expect(seen.atHandlerEnd).toBeGreaterThan(0);
    expect(seen.touches).toBe(seen.atSettleStart);
  });

  it('stops touching before the retry of a dead letter whose write failed', async () => {
    // Arrange: the last allowed delivery of a failing handler; its letter's write fails after 50 ms
    // (touched meanwhile), so the message is retried with the letter from within the settle. The delivery
    // keeps no guard of its own: the shared keep-alive must stop before `retry` is called.
    const { delivery, seen } = slowSettleDelivery(true, 2);
    let writeTouches = -1;
    delivery.deadLetter = async () => {
      const before = seen.touches;
      await sleep(50);
      writeTouches = seen.touches - before;
      throw new Error('DLQ unavailable');
    };
    // Act
    await processDelivery(
      consumerOptions(),
      () => {
        throw new Error('card declined');
      },
      delivery,
    );
    await sleep(50);
    // Assert: touched through the write; none from the retry's start on (before: one every 10 ms through
    // the 100 ms retry, which a JetStream server takes as progress, redelivering ack_wait after the last
    // one instead of after the delay).
    expect(seen.settled).toBe('retry');
    expect(writeTouches).toBeGreaterThanOrEqual(3);
    expect(seen.touches).toBe(seen.atSettleStart);
  });

  it('stops touching before the retry of a redelivery whose recorded letter cannot be written', async () => {
    // Arrange: a redelivery carrying a letter, whose write fails again after 50 ms: retried with it.
    const { delivery, seen } = slowSettleDelivery(true, 2);
    delivery.pendingDeadLetter = {
      consumer: 'billing',
      key: 'k1',
      reason: DeadLetterReason.HandlerError,
      error: describeError(new Error('card declined')),
      deliveryCount: 1,
      failedAt: new Date().toISOString(),
    };
    let writeTouches = -1;
    delivery.deadLetter = async () => {
      const before = seen.touches;
      await sleep(50);
      writeTouches = seen.touches - before;
      throw new Error('DLQ unavailable');
    };
    // Act
    await processDelivery(consumerOptions(), () => {}, delivery);
    await sleep(50);
    // Assert
    expect(seen.settled).toBe('retry');
    expect(writeTouches).toBeGreaterThanOrEqual(3);
    expect(seen.touches).toBe(seen.atSettleStart);
  });

  it('touches while a redelivery writes a dead letter decided on before, running no handler', async () => {
    // Arrange: a redelivery carrying the letter an earlier delivery could not write.
    const { delivery, seen } = slowSettleDelivery(true, 2);
    delivery.pendingDeadLetter = {
      consumer: 'billing',
      key: 'k1',
      reason: DeadLetterReason.HandlerError,
      error: describeError(new Error('card declined')),
      deliveryCount: 1,
      failedAt: new Date().toISOString(),
    };
    const runs: string[] = [];
    // Act
    await processDelivery(consumerOptions(), (message) => void runs.push(message.id), delivery);
    await sleep(50);
    // Assert: touched through the 100 ms write (before: none), none after.
    expect(runs).toEqual([]);
    expect(seen.settled).toBe('dead-letter');
    expect(seen.atSettleEnd - seen.atSettleStart).toBeGreaterThanOrEqual(3);
    expect(seen.touches).toBe(seen.atSettleEnd);
  });

  it('stops as the execution settles without the flag', async () => {
    // Arrange
    const { delivery, seen } = slowSettleDelivery(false);
    // Act
    await processDelivery(consumerOptions(), () => {}, delivery);
    // Assert: as before, no touch during the ack.
    expect(seen.settled).toBe('ack');
    expect(seen.atSettleEnd).toBe(seen.atSettleStart);
  });
});
