/**
 * Coalesces concurrent `claim` and `complete` calls into `claimMany` / `completeMany` batches, so that a
 * burst of deliveries (a consumer's prefetch, a busy API) costs one store round trip per batch instead of
 * one per key, while a lone call is still sent at once. Semantics are unchanged: each item is applied
 * exactly as a single call would be.
 * @module
 */
import type { ClaimResult } from '../core/record.js';
import type { ClaimRequest, CompleteRequest, Store } from './store.js';

/** Options of {@link withBatching}. */
export interface BatchingOptions {
  /** Most items in one batch. @default 100 */
  maxBatch?: number;
  /**
   * Store calls (single or batch) outstanding at once before further calls wait and are grouped. Below
   * this, a call is sent alone at once, so a quiet service pays no latency for batching. @default 4
   */
  maxInFlight?: number;
}

interface Pending<Req, Res> {
  request: Req;
  resolve(value: Res): void;
  reject(error: unknown): void;
}

/**
 * Natural batching: the first call of an event-loop tick is sent alone and at once; the calls made in the
 * rest of that tick (a burst: one socket read's deliveries, a clump of requests) wait until the tick ends
 * and go together. While fewer than `maxInFlight` store calls are outstanding, what is pending is sent at
 * once; calls that arrive while the store is busy wait, and go together as soon as a call returns. Under
 * load the batches grow by themselves; at rest nothing waits beyond the current tick.
 */
class Batcher<Req, Res> {
  private pending: Pending<Req, Res>[] = [];
  private inFlight = 0;

  constructor(
    private readonly sendOne: (request: Req) => Promise<Res>,
    private readonly sendMany: (requests: Req[]) => Promise<Res[]>,
    private readonly maxBatch: number,
    private readonly maxInFlight: number,
  ) {}

  /** True while a flush at the end of the current tick is scheduled. */
  private scheduled = false;

  add(request: Req): Promise<Res> {
    return new Promise<Res>((resolve, reject) => {
      this.pending.push({ request, resolve, reject });
      // The first call of a tick goes at once; calls made in the same tick after it are held until the
      // end of the tick and go together.
      if (this.scheduled) return;
      this.scheduled = true;
      this.pump();
      process.nextTick(() => {
        this.scheduled = false;
        this.pump();
      });
    });
  }

  private pump(): void {
    while (this.pending.length > 0 && this.inFlight < this.maxInFlight) {
      const batch = this.pending.splice(0, this.maxBatch);
      this.inFlight++;
      const sent =
        batch.length === 1
          ? this.sendOne(batch[0]!.request).then((result) => [result])
          : this.sendMany(batch.map((p) => p.request));
      sent
        .then(
          (results) => {
            if (results.length !== batch.length) {
              const error = new Error(
                `batch returned ${results.length} results for ${batch.length} items`,
              );
              for (const p of batch) p.reject(error);
              return;
            }
            for (const [i, p] of batch.entries()) p.resolve(results[i] as Res);
          },
          (error: unknown) => {
            for (const p of batch) p.reject(error);
          },
        )
        .finally(() => {
          this.inFlight--;
          this.pump();
        });
    }
  }
}

/** True when `store` can take batches. */
export function supportsBatching(
  store: Store,
): store is Store & Required<Pick<Store, 'claimMany' | 'completeMany'>> {
  return (
    store.capabilities.batch === true &&
    typeof store.claimMany === 'function' &&
    typeof store.completeMany === 'function'
  );
}

/**
 * A view of `store` whose concurrent `claim` and `complete` calls are coalesced into batches under load.
 * Other methods pass through.
 * Returns `store` itself when it cannot take batches.
 */
export function withBatching(store: Store, options: BatchingOptions = {}): Store {
  if (!supportsBatching(store)) return store;
  const maxBatch = options.maxBatch ?? 100;
  const maxInFlight = options.maxInFlight ?? 4;
  const claims = new Batcher<ClaimRequest, ClaimResult>(
    ({ key, ...claimOptions }) => store.claim(key, claimOptions),
    (requests) => store.claimMany(requests),
    maxBatch,
    maxInFlight,
  );
  const completes = new Batcher<CompleteRequest, boolean>(
    ({ key, token, outcome, retentionMs }) => store.complete(key, token, outcome, retentionMs),
    (requests) => store.completeMany(requests),
    maxBatch,
    maxInFlight,
  );
  // Explicit delegation, bound to the store: a class-based store may rely on `this` (private fields).
  const view: Store = {
    name: store.name,
    capabilities: store.capabilities,
    claim: (key, claimOptions) => claims.add({ key, ...claimOptions }),
    complete: (key, token, outcome, retentionMs) =>
      completes.add({ key, token, outcome, retentionMs }),
    release: (key, token) => store.release(key, token),
    extend: (key, token, leaseMs) => store.extend(key, token, leaseMs),
    get: (key) => store.get(key),
    delete: (key) => store.delete(key),
    stats: () => store.stats(),
    claimMany: (requests) => store.claimMany(requests),
    completeMany: (requests) => store.completeMany(requests),
  };
  if (store.purgeExpired !== undefined) {
    const purge = store.purgeExpired.bind(store);
    view.purgeExpired = (purgeOptions) => purge(purgeOptions);
  }
  if (store.close !== undefined) {
    const close = store.close.bind(store);
    view.close = () => close();
  }
  return view;
}
