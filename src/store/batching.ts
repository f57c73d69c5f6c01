/**
 * Coalesces concurrent `claim` and `complete` calls into `claimMany` / `completeMany` batches, so that a
 * burst of deliveries (a consumer's prefetch, a busy API) costs one store round trip per batch instead of
 * one per key. Semantics are unchanged: each item is applied exactly as a single call would be.
 * @module
 */
import type { ClaimResult } from '../core/record.js';
import type { ClaimRequest, CompleteRequest, Store } from './store.js';

/** Options of {@link withBatching}. */
export interface BatchingOptions {
  /** Most items in one batch; a full batch is sent at once. @default 100 */
  maxBatch?: number;
}

interface Pending<Req, Res> {
  request: Req;
  resolve(value: Res): void;
  reject(error: unknown): void;
}

/**
 * Collects calls made in the same turn of the event loop and sends them as one batch on the next
 * (`setImmediate`), or as soon as `maxBatch` items are waiting.
 */
class Batcher<Req, Res> {
  private pending: Pending<Req, Res>[] = [];
  private scheduled = false;

  constructor(
    private readonly send: (requests: Req[]) => Promise<Res[]>,
    private readonly maxBatch: number,
  ) {}

  add(request: Req): Promise<Res> {
    return new Promise<Res>((resolve, reject) => {
      this.pending.push({ request, resolve, reject });
      if (this.pending.length >= this.maxBatch) {
        this.flush();
      } else if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  private flush(): void {
    this.scheduled = false;
    const batch = this.pending;
    if (batch.length === 0) return;
    this.pending = [];
    this.send(batch.map((p) => p.request)).then(
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
    );
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
 * A view of `store` whose `claim` and `complete` are coalesced into batches. Other methods pass through.
 * Returns `store` itself when it cannot take batches.
 */
export function withBatching(store: Store, options: BatchingOptions = {}): Store {
  if (!supportsBatching(store)) return store;
  const maxBatch = options.maxBatch ?? 100;
  const claims = new Batcher<ClaimRequest, ClaimResult>((r) => store.claimMany(r), maxBatch);
  const completes = new Batcher<CompleteRequest, boolean>((r) => store.completeMany(r), maxBatch);
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
