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

/** Result of {@link collectBody}. */
export type CollectedBody =
  | { complete: true; body: Uint8Array }
  | { complete: false; head: Uint8Array[]; bytes: number; rest: AsyncIterator<Uint8Array> };

/**
 * Read a streamed body until it ends or exceeds `limit`. When it ends in time, the whole body is
 * returned; otherwise the chunks read so far and the iterator to read the rest from.
 */
export async function collectBody(
  source: AsyncIterable<Uint8Array | string>,
  limit: number,
): Promise<CollectedBody> {
  const iterator = source[Symbol.asyncIterator]();
  const head: Uint8Array[] = [];
  let bytes = 0;
  for (;;) {
    const next = await iterator.next();
    if (next.done) return { complete: true, body: Buffer.concat(head) };
    const chunk = typeof next.value === 'string' ? Buffer.from(next.value, 'utf8') : next.value;
    head.push(chunk);
    bytes += chunk.byteLength;
    if (bytes > limit) {
      const rest: AsyncIterator<Uint8Array> = {
        next: async () => {
          const r = await iterator.next();
          if (r.done) return r;
          return {
            done: false,
            value: typeof r.value === 'string' ? Buffer.from(r.value) : r.value,
          };
        },
        return: async () => {
          await iterator.return?.();
          return { done: true, value: undefined };
        },
      };
      return { complete: false, head, bytes, rest };
    }
  }
}
