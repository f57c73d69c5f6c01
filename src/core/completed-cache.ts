/**
 * A bounded cache of completed records, least recently used first out. Completed records never change
 * before they expire, so serving a hot replay from here is safe and saves a store round trip. (An admin
 * `delete` on the store is not seen by other processes' caches until the entry expires or is evicted.)
 * @module
 */
import type { CompletedRecord } from './record.js';

/**
 * Two generations of at most `maxEntries / 2` records each: new and recently used records go to the
 * young one; when it is full it becomes the old one and the previous old generation is dropped whole. A
 * hit in the old generation moves the record back to the young one. This is LRU at the granularity of
 * half the cache, and every executed run adds a record: a strict LRU paid a `Map` delete, an iterator and
 * an eviction on each of them, where this pays one `Map.set`.
 */
export class CompletedCache {
  private young = new Map<string, CompletedRecord>();
  private old = new Map<string, CompletedRecord>();
  private readonly generation: number;

  /** @param maxEntries - Records kept at most; the least recently used go first. */
  constructor(private readonly maxEntries: number) {
    this.generation = Math.max(Math.floor(maxEntries / 2), 1);
  }

  /** The record for `key` if cached and not expired at `now`. */
  get(key: string, now: number): CompletedRecord | undefined {
    const young = this.young.get(key);
    if (young !== undefined) {
      if (young.expiresAt > now) return young;
      this.young.delete(key);
      return undefined;
    }
    const old = this.old.get(key);
    if (old === undefined) return undefined;
    this.old.delete(key);
    if (old.expiresAt <= now) return undefined;
    this.add(key, old); // used again: back to the young generation
    return old;
  }

  /** Remember a completed record. */
  set(key: string, record: CompletedRecord): void {
    if (this.maxEntries < 1) return;
    this.old.delete(key);
    this.add(key, record);
  }

  /** Number of cached records. */
  get size(): number {
    return this.young.size + this.old.size;
  }

  private add(key: string, record: CompletedRecord): void {
    this.young.set(key, record);
    if (this.young.size >= this.generation) {
      this.old = this.young;
      this.young = new Map();
    }
  }
}
