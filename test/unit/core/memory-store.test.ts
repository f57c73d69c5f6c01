import { describe, expect, it } from 'vitest';
import { createIdempotency, memoryStore } from '../../../src/index.js';
import { ManualClock } from '../../helpers/clock.js';

describe('memoryStore', () => {
  it('does not grow without bound under a stream of unique keys', async () => {
    // Arrange: records live 1 s; 50,000 unique keys arrive, 100 per simulated 10 ms.
    const clock = new ManualClock();
    const store = memoryStore({ clock });
    const idempotency = createIdempotency({
      store,
      clock,
      retentionMs: 1000,
      cache: false,
      extendLease: false,
    });
    let peak = 0;
    // Act
    for (let i = 0; i < 50_000; i++) {
      await idempotency.run({ key: `unique-${i}` }, () => i);
      if (i % 100 === 99) clock.advance(10);
      peak = Math.max(peak, store.size);
    }
    // Assert: at most ~1 s of traffic (10,000 records) is live; sweeping keeps the map within about twice that.
    expect(peak).toBeLessThanOrEqual(20_100);
    expect((await store.stats()).completed).toBeLessThanOrEqual(10_000);
  });

  it('purges dead records in bounded batches', async () => {
    const clock = new ManualClock();
    const store = memoryStore({ clock });
    for (let i = 0; i < 10; i++) await store.claim(`k${i}`, { fingerprint: '', leaseMs: 100 });
    clock.advance(200);
    expect(await store.purgeExpired({ limit: 4 })).toBe(4);
    expect(await store.purgeExpired({ limit: 100 })).toBe(6);
    expect(store.size).toBe(0);
  });

  it.each([
    [0, '0'],
    [-1, '-1'],
    [1.5, '1.5'],
    [Number.NaN, 'NaN'],
    ['2', '"2"'],
  ])(
    'refuses a purge limit of %o as the SQL stores do, and purges nothing',
    async (limit, shown) => {
      // Arrange
      const clock = new ManualClock();
      const store = memoryStore({ clock });
      for (let i = 0; i < 3; i++) await store.claim(`k${i}`, { fingerprint: '', leaseMs: 100 });
      clock.advance(200);
      // Act / Assert
      await expect(store.purgeExpired({ limit: limit as number })).rejects.toThrow(
        expect.objectContaining({
          code: 'invalid_options',
          message: `purgeExpired: limit must be a positive integer, got ${shown}`,
        }),
      );
      expect(store.size).toBe(3);
    },
  );
});
