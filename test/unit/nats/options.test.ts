/**
 * The NATS consumer's `workingInterval` is a timer's interval: one past 2^31-1 ms (about 24.8 days), which
 * Node fires at once, would send `working()` in a loop. It is refused before the consumer is touched.
 */
import { describe, expect, it } from 'vitest';
import { createIdempotency, type Duration, memoryStore } from '../../../src/index.js';
import { idempotentConsumer } from '../../../src/nats/index.js';

/** A pull consumer that records being used, and is never expected to be. */
function untouchedConsumer() {
  const used: string[] = [];
  const consumer = {
    fetch: async () => {
      used.push('fetch');
      throw new Error('not expected');
    },
    info: async () => {
      used.push('info');
      return { config: { ack_wait: 30e9 } };
    },
  };
  return { consumer, used };
}

describe('NATS consumer workingInterval', () => {
  it.each([
    ['30d', '"30d"'],
    [2 ** 31, String(2 ** 31)],
    [0, '0'],
  ])('refuses %o before touching the consumer', async (workingInterval, shown) => {
    // Arrange
    const { consumer, used } = untouchedConsumer();
    // Act
    const started = idempotentConsumer(consumer as never, () => {}, {
      name: 'working',
      idempotency: createIdempotency({ store: memoryStore() }),
      workingInterval: workingInterval as Duration,
    });
    // Assert
    await expect(started).rejects.toThrow(
      `workingInterval: expected a positive number of ms (at most 2147483647 ms) or a duration like '500ms' or '30s', got ${shown}`,
    );
    expect(used).toEqual([]);
  });
});
