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

  it('holds at most maxBytes of outcomes: 1,200 outcomes of 256 KiB keep 16 MiB, not 1,000 of them', () => {
    // Arrange: HTTP outcomes are whole response bodies; by count alone, 1,000 of 1 MiB held a GiB.
    const cache = new CompletedCache(1000, 16 * 1024 * 1024);
    const large = (): CompletedRecord => ({ ...record(), outcome: new Uint8Array(256 * 1024) });
    // Act
    for (let i = 0; i < 1200; i++) cache.set(`k${i}`, large());
    // Assert: within the budget, and the most recent still served.
    expect(cache.bytes).toBeLessThanOrEqual(16 * 1024 * 1024);
    expect(cache.size).toBeLessThanOrEqual(64);
    expect(cache.get('k1199', 0)).toBeDefined();
    expect(cache.get('k0', 0)).toBeUndefined();
  });

  it('counts the bytes of records replaced, used again and expired, and caches none over half the budget', () => {
    // Arrange
    const cache = new CompletedCache(100, 1000);
    const sized = (bytes: number, expiresAt = 10_000): CompletedRecord => ({
      ...record(expiresAt),
      outcome: new Uint8Array(bytes),
    });
    // Act / Assert
    cache.set('a', sized(100));
    cache.set('a', sized(200));
    expect(cache.bytes).toBe(200);
    cache.set('big', sized(501));
    expect(cache.get('big', 0)).toBeUndefined();
    expect(cache.bytes).toBe(200);
    cache.set('b', sized(100, 50));
    expect(cache.get('b', 60)).toBeUndefined();
    expect(cache.bytes).toBe(200);
    cache.set('c', sized(300)); // the young half reaches 500 bytes: it becomes the old one
    expect(cache.get('a', 0)).toBeDefined(); // back to the young half
    expect(cache.bytes).toBe(500);
  });
});
