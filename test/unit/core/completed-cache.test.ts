import { describe, expect, it } from 'vitest';
import { CompletedCache } from '../../../src/core/completed-cache.js';
import { type CompletedRecord, RecordStatus } from '../../../src/core/record.js';

const record = (expiresAt = 10_000): CompletedRecord => ({
  status: RecordStatus.Completed,
  fingerprint: '',
  token: 1,
  outcome: Uint8Array.of(1, 0, 0x75),
  completedAt: 0,
  expiresAt,
});

describe('CompletedCache', () => {
  it('keeps at most maxEntries records, and at least the maxEntries / 2 most recently used', () => {
    // Arrange
    const cache = new CompletedCache(4);
    for (const key of ['a', 'b', 'c']) cache.set(key, record());
    // Act: 'a' is used again, then new records arrive
    expect(cache.get('a', 0)).toBeDefined();
    for (const key of ['d', 'e', 'f', 'g', 'h']) {
      cache.set(key, record());
      // Assert
      expect(cache.size).toBeLessThanOrEqual(4);
    }
    expect(cache.get('g', 0)).toBeDefined();
    expect(cache.get('h', 0)).toBeDefined();
    expect(cache.get('a', 0)).toBeUndefined();
    expect(cache.get('b', 0)).toBeUndefined();
  });

  it('moves a record used again back among the most recent', () => {
    // Arrange
    const cache = new CompletedCache(4);
    for (const key of ['a', 'b', 'c']) cache.set(key, record());
    // Act: 'a' is old by now; a hit moves it back, ahead of 'b' and 'c'
    expect(cache.get('a', 0)).toBeDefined();
    cache.set('d', record());
    // Assert
    expect(cache.get('a', 0)).toBeDefined();
    expect(cache.get('d', 0)).toBeDefined();
  });

  it('never serves an expired record', () => {
    // Arrange
    const cache = new CompletedCache(10);
    cache.set('a', record(100));
    // Act / Assert
    expect(cache.get('a', 99)).toBeDefined();
    expect(cache.get('a', 100)).toBeUndefined();
    expect(cache.size).toBe(0);
  });

  it('stores nothing with maxEntries 0', () => {
    const cache = new CompletedCache(0);
    cache.set('a', record());
    expect(cache.get('a', 0)).toBeUndefined();
  });
});
