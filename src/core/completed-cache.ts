/**
 * A bounded cache of completed records, least recently used first out. Completed records never change
 * before they expire, so serving a hot replay from here is safe and saves a store round trip. (An admin
 * `delete` on the store is not seen by other processes' caches until the entry expires or is evicted.)
 * @module
 */
import type { CompletedRecord } from './record.js';

/** The bytes the cache holds by default: the outcomes' bytes and fingerprints, not the `Map`s' overhead. */
export const DEFAULT_CACHE_MAX_BYTES = 16 * 1024 * 1024;

/**
 * Two generations of at most `maxEntries / 2` records and `maxBytes / 2` bytes each: new and recently
 * used records go to the young one; when it is full it becomes the old one and the previous old
 * generation is dropped whole. A hit in the old generation moves the record back to the young one. This
 * is LRU at the granularity of half the cache, and every executed run adds a record: a strict LRU paid a
 * `Map` delete, an iterator and an eviction on each of them, where this pays one `Map.set`.
 *
 * Bounded in bytes too: HTTP outcomes are whole response bodies (up to `maxBodyBytes`, 1 MiB), and 1,000
 * of them held a GiB (1,200 runs of 256 KiB over Redis left 184 MB in the cache). A record larger than
 * half the budget is not cached: its replays go to the store.
 */
export class CompletedCache {
  private young = new Map<string, CompletedRecord>();
  private old = new Map<string, CompletedRecord>();
  private youngBytes = 0;
  private oldBytes = 0;
  private readonly generation: number;
  private readonly generationBytes: number;

  /**
   * @param maxEntries - Records kept at most; the least recently used go first.
   * @param maxBytes - Bytes of outcomes and fingerprints kept at most (see {@link sizeOf}).
   */
  constructor(
    private readonly maxEntries: number,
    maxBytes: number = DEFAULT_CACHE_MAX_BYTES,
  ) {
    this.generation = Math.max(Math.floor(maxEntries / 2), 1);
    this.generationBytes = Math.max(Math.floor(maxBytes / 2), 1);
  }

  /** The record for `key` if cached and not expired at `now`. */
  get(key: string, now: number): CompletedRecord | undefined {
    const young = this.young.get(key);
    if (young !== undefined) {
      if (young.expiresAt > now) return young;
      this.young.delete(key);
      this.youngBytes -= sizeOf(young);
      return undefined;
    }
    const old = this.old.get(key);
    if (old === undefined) return undefined;
    this.old.delete(key);
    this.oldBytes -= sizeOf(old);
    if (old.expiresAt <= now) return undefined;
    this.add(key, old); // used again: back to the young generation
    return old;
  }

  /** Remember a completed record, unless it alone would take more than half the byte budget. */
  set(key: string, record: CompletedRecord): void {
    if (this.maxEntries < 1) return;
    const bytes = sizeOf(record);
    if (bytes > this.generationBytes) return;
    const old = this.old.get(key);
    if (old !== undefined) {
      this.old.delete(key);
      this.oldBytes -= sizeOf(old);
    }
    const young = this.young.get(key);
    if (young !== undefined) this.youngBytes -= sizeOf(young);
    this.add(key, record, bytes);
  }

  /** Number of cached records. */
  get size(): number {
    return this.young.size + this.old.size;
  }

  /** Bytes of the cached records (see {@link sizeOf}). */
  get bytes(): number {
    return this.youngBytes + this.oldBytes;
  }

  private add(key: string, record: CompletedRecord, bytes = sizeOf(record)): void {
    this.young.set(key, record);
    this.youngBytes += bytes;
    if (this.young.size >= this.generation || this.youngBytes >= this.generationBytes) {
      this.old = this.young;
      this.oldBytes = this.youngBytes;
      this.young = new Map();
      this.youngBytes = 0;
    }
  }
}

/**
 * What a record holds that grows with the request: its outcome's bytes and its fingerprint (a string of
 * 2 bytes a character, at most, in V8). The fixed part of a record and its `Map` entry are not counted.
 */
function sizeOf(record: CompletedRecord): number {
  return record.outcome.byteLength + record.fingerprint.length * 2;
}
