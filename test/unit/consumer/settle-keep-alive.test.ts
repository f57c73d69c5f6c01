/**
 * The broker's timer of a delivery is kept alive until the delivery is settled, through a completion the
 * engine retries, but no longer than a lease after the handler settled.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import {
  type ConsumerOptions,
  type Delivery,
  processDelivery,
  resolveConsumerOptions,
} from '../../../src/consumer/index.js';
import {
  createIdempotency,
  isStoreUnavailableError,
  memoryStore,
  type Store,
} from '../../../src/index.js';

interface Message {
  id: string;
}

/** A delivery that counts its touches, and notes how many there were when it was settled. */
function touchedDelivery() {
  const seen = { touches: 0, touchesAtSettle: -1, touchesAtHandlerEnd: -1, acked: false };
  const delivery: Delivery<Message> = {
    message: { id: 'k1' },
    deliveryCount: 1,
    ack: () => {
      seen.acked = true;
      seen.touchesAtSettle = seen.touches;
    },
    retry: () => {
      seen.touchesAtSettle = seen.touches;
    },
    deadLetter: () => {
      seen.touchesAtSettle = seen.touches;
    },
    touch: () => void seen.touches++,
    touchIntervalMs: 10,
  };
  // The handler: notes how many touches there were when it ended.
  const handler = () => {
    seen.touchesAtHandlerEnd = seen.touches;
  };
  return { delivery, seen, handler };
}

function consumerOptions(store: Store, overrides: Partial<ConsumerOptions<Message>> = {}) {
  return resolveConsumerOptions<Message>(
    { idempotency: createIdempotency({ store, leaseMs: 5000 }), name: 'billing', ...overrides },
    (message) => message.id,
  );
}

describe('keeping a delivery alive until it is settled', () => {
  it('touches while a failed completion is retried, and stops once the delivery is acked', async () => {
    // Arrange: the first three completions fail (the engine retries them 50, 100 and 150 ms apart).
    const store = memoryStore();
    const complete = store.complete.bind(store);
    let failures = 3;
    store.complete = (...args) =>
      failures-- > 0 ? Promise.reject(new Error('link cut')) : complete(...args);
    const options = consumerOptions(store);
    const { delivery, seen, handler } = touchedDelivery();
    // Act
    await processDelivery(options, handler, delivery);
    await sleep(60);
    // Assert: touched through the ~300 ms of retries, none after the ack.
    expect(seen.acked).toBe(true);
    expect(seen.touchesAtSettle - seen.touchesAtHandlerEnd).toBeGreaterThanOrEqual(5);
    expect(seen.touches).toBe(seen.touchesAtSettle);
  });

  it('stops touching a lease after the handler settled, when the completion never answers', async () => {
    // Arrange: a store call that hangs for good (no timeout of its own).
    const store = memoryStore();
    store.complete = () => new Promise(() => {});
    const options = consumerOptions(store, { lease: '150ms' });
    const { delivery, seen, handler } = touchedDelivery();
    // Act
    void processDelivery(options, handler, delivery);
    await sleep(400);
    const afterLease = seen.touches;
    await sleep(200);
    // Assert: kept alive past the handler, then left to the broker's timer (the message is redelivered).
    expect(afterLease).toBeGreaterThan(seen.touchesAtHandlerEnd + 3);
    expect(seen.touches).toBe(afterLease);
    expect(seen.acked).toBe(false);
  });

  it('stops touching the engine’s lease after the handler settled, with an engine instance and no lease, and says so', async () => {
    // Arrange: the consumer is given an engine, not its options: only the run knows the lease (150 ms).
    const store = memoryStore();
    store.complete = () => new Promise(() => {});
    const errors: Array<{ operation: string; error: unknown }> = [];
    const options = resolveConsumerOptions<Message>(
      {
        idempotency: createIdempotency({ store, leaseMs: 150 }),
        name: 'billing',
        hooks: { onBrokerError: ({ operation, error }) => errors.push({ operation, error }) },
      },
      (message) => message.id,
    );
    const { delivery, seen, handler } = touchedDelivery();
    // Act
    void processDelivery(options, handler, delivery);
    await sleep(400);
    const afterLease = seen.touches;
    await sleep(200);
    // Assert: before, it was touched for as long as the process lived, and nothing was reported.
    expect(afterLease).toBeGreaterThan(seen.touchesAtHandlerEnd + 3);
    expect(seen.touches).toBe(afterLease);
    expect(seen.acked).toBe(false);
    expect(errors.map(({ operation }) => operation)).toEqual(['touch']);
    expect(isStoreUnavailableError(errors[0]?.error)).toBe(true);
    expect(String((errors[0]?.error as Error | undefined)?.message)).toContain('150 ms');
  });

  it('reports a failed touch with the delivery’s key', async () => {
    // Arrange: every touch fails while the handler runs 60 ms.
    const events: Array<{ operation: string; key: string | undefined }> = [];
    const options = consumerOptions(memoryStore(), {
      hooks: { onBrokerError: ({ operation, key }) => events.push({ operation, key }) },
    });
    const { delivery } = touchedDelivery();
    const failing: Delivery<Message> = {
      ...delivery,
      touch: () => Promise.reject(new Error('connection closed')),
    };
    // Act
    await processDelivery(options, () => sleep(60), failing);
    // Assert: before, a touch's error carried no key, unlike every other event of the delivery.
    expect(events.length).toBeGreaterThan(0);
    expect(events.every(({ operation, key }) => operation === 'touch' && key === 'k1')).toBe(true);
  });
});
