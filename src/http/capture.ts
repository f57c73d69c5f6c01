/**
 * Bounded body capture: copy response chunks up to `maxBodyBytes` and stop buffering past it (the response
 * still goes out whole; it is only not kept).
 * @module
 */

/** Collects chunks of a body up to a limit. */
export interface BodyCollector {
  /**
   * Add a chunk (kept only while under the limit). It is copied unless `owned` says that nothing else
   * holds it (a buffer the caller just created), since the framework may reuse or mutate its buffers.
   */
  add(chunk: Uint8Array, owned?: boolean): void;
  /** Bytes seen so far, the ones past the limit included. */
  readonly bytes: number;
  /** The whole body, or `undefined` once it went over the limit. */
  body(): Uint8Array | undefined;
}

/** A collector keeping at most `limit` bytes. */
export function createBodyCollector(limit: number): BodyCollector {
  return new Collector(limit);
}

class Collector implements BodyCollector {
  bytes = 0;
  private chunks: Uint8Array[] | undefined = [];

  constructor(private readonly limit: number) {}

  add(chunk: Uint8Array, owned = false): void {
    this.bytes += chunk.byteLength;
    if (this.chunks === undefined) return;
    if (this.bytes > this.limit) {
      this.chunks = undefined; // over the limit: free what we held, the response is not kept
      return;
    }
    this.chunks.push(owned ? chunk : Buffer.from(chunk));
  }

  body(): Uint8Array | undefined {
    const chunks = this.chunks;
    if (chunks === undefined) return undefined;
    // The common case, one chunk, is already a private copy: no second copy.
    if (chunks.length === 1) return chunks[0];
    return Buffer.concat(chunks);
  }
}
