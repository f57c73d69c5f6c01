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
});
