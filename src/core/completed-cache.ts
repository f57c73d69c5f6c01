/**
 * A bounded, least-recently-used cache of completed records. Completed records never change before they
 * expire, so serving a hot replay from here is safe and saves a store round trip. (An admin `delete` on the
 * store is not seen by other processes' caches until the entry expires or is evicted.)
 * @module
 */
import type { CompletedRecord } from './record.js';

/** LRU of completed records keyed by storage key. */
export class CompletedCache {
  private readonly entries = new Map<string, CompletedRecord>();

  /** @param maxEntries - Entries kept at most; the least recently used goes first. */
  constructor(private readonly maxEntries: number) {}

  /** The record for `key` if cached and not expired at `now`. */
  get(key: string, now: number): CompletedRecord | undefined {
    const record = this.entries.get(key);
    if (record === undefined) return undefined;
    this.entries.delete(key);
    if (record.expiresAt <= now) return undefined;
    this.entries.set(key, record); // re-insert: most recently used moves to the end
    return record;
  }

  /** Remember a completed record. */
  set(key: string, record: CompletedRecord): void {
    this.entries.delete(key);
    this.entries.set(key, record);
    if (this.entries.size > this.maxEntries) {
      const oldest = this.entries.keys().next();
      if (!oldest.done) this.entries.delete(oldest.value);
    }
  }

  /** Number of cached records. */
  get size(): number {
    return this.entries.size;
  }
}
