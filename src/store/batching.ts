/**
 * Coalesces concurrent `claim` and `complete` calls into `claimMany` / `completeMany` batches, so that a
 * burst of deliveries (a consumer's prefetch, a busy API) costs one store round trip per batch instead of
 * one per key, while a lone call is still sent at once. Semantics are unchanged: each item is applied
 * exactly as a single call would be.
 * @module
 */
import { InvalidOptionsError } from '../core/errors.js';
import type { ClaimResult } from '../core/record.js';
import type { BatchWindow, ClaimRequest, CompleteRequest, Store } from './store.js';

/** Options of {@link withBatching}. */
export interface BatchingOptions {
  /** Most items in one batch. @default 100 */
  maxBatch?: number;
  /**
   * Store calls (single or batch) outstanding at once before further calls wait and are grouped. Below
   * this, what a tick produced is sent at the end of that tick, so a quiet service pays no latency for
   * batching. @default 4
   */
  maxInFlight?: number;
  /**
   * Which calls wait for each other: those of one event-loop tick (`'tick'`), or every call of one turn
   * of the event loop (`'turn'`: worth it for a synchronous store such as SQLite, where a batch is one
   * transaction; measured on Express S2, server CPU +247 → +40 µs per request over the baseline).
   * @default 'tick'
   */
  window?: BatchWindow;
}

/**
 * Natural batching: the calls made in one event-loop tick (a burst: one socket read's deliveries, a clump of
 * requests) are held until that tick ends and go together; a lone call goes at the end of its own tick,
 * which adds no wait worth the name (it is the same turn of the event loop). While fewer than
 * `maxInFlight` store calls are outstanding, what is pending is sent at once; calls that arrive while the
 * store is busy wait, and go together as soon as a call returns. Under load the batches grow by
 * themselves; at rest nothing waits beyond the current tick.
 *
 * Why the first call of a tick is not sent ahead of the others: it bought no latency and cost a round trip.
 * node-redis writes its commands in a `setImmediate`, so the first call left in the same write as the
 * batch behind it, and on the consumer bench the extra script call per burst cost Redis and Node about
 * 2 µs per message (`bench/consumers.ts`: 55% → 65% of the plain consumer). PostgreSQL, whose client
 * writes at once, measured no better with it either.
 *
 * Pending calls are kept in three parallel arrays rather than as one object per call: every message goes
 * through here twice (claim and complete), and the arrays of a batch are handed over whole when they fit
 * in one (no copy, no `map` to pick the requests out).
 */
class Batcher<Req, Res> {
  private requests: Req[] = [];
  private resolves: Array<(value: Res) => void> = [];
  private rejects: Array<(error: unknown) => void> = [];
  private inFlight = 0;
  /** True while a flush at the end of the current tick is scheduled. */
  private scheduled = false;

  constructor(
    private readonly sendOne: (request: Req) => Promise<Res>,
    private readonly sendMany: (requests: Req[]) => Promise<Res[]>,
    private readonly maxBatch: number,
    private readonly maxInFlight: number,
    private readonly window: BatchWindow,
  ) {}

  add(request: Req): Promise<Res> {
    return new Promise<Res>((resolve, reject) => {
      this.requests.push(request);
      this.resolves.push(resolve);
      this.rejects.push(reject);
      // Every call of a tick (or of a turn) is held until its end, and they go together.
      if (this.scheduled) return;
      this.scheduled = true;
      if (this.window === 'turn') setImmediate(this.endOfTick);
      else process.nextTick(this.endOfTick);
    });
  }

  private readonly endOfTick = (): void => {
    this.scheduled = false;
    this.pump();
  };

  private pump(): void {
    while (this.requests.length > 0 && this.inFlight < this.maxInFlight) {
      let requests: Req[];
      let resolves: Array<(value: Res) => void>;
      let rejects: Array<(error: unknown) => void>;
      if (this.requests.length <= this.maxBatch) {
        ({ requests, resolves, rejects } = this);
        this.requests = [];
        this.resolves = [];
        this.rejects = [];
      } else {
        requests = this.requests.splice(0, this.maxBatch);
        resolves = this.resolves.splice(0, this.maxBatch);
        rejects = this.rejects.splice(0, this.maxBatch);
      }
      this.inFlight++;
      const count = requests.length;
      const sent =
        count === 1
          ? this.sendOne(requests[0] as Req).then((result) => [result])
          : this.sendMany(requests);
      sent
        .then(
          (results) => {
            if (results.length !== count) {
              const error = new Error(
                `batch returned ${results.length} results for ${count} items`,
              );
              for (const reject of rejects) reject(error);
              return;
            }
            for (let i = 0; i < count; i++)
              (resolves[i] as (value: Res) => void)(results[i] as Res);
          },
          (error: unknown) => {
            for (const reject of rejects) reject(error);
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
  const maxBatch = options.maxBatch ?? 100;
  const maxInFlight = options.maxInFlight ?? 4;
  const window = options.window ?? 'tick';
  // Checked even for a store that takes no batches: the same options must not fail later on another store.
  // A zero would never send anything (maxInFlight) or send empty batches forever (maxBatch).
  for (const [name, value] of [
    ['maxBatch', maxBatch],
    ['maxInFlight', maxInFlight],
  ] as const) {
    if (!(Number.isSafeInteger(value) && value > 0)) {
      throw new InvalidOptionsError(
        `batch.${name} must be a positive integer, got ${String(value)}`,
      );
    }
  }
  if (window !== 'tick' && window !== 'turn') {
    throw new InvalidOptionsError(`batch.window must be 'tick' or 'turn', got ${String(window)}`);
  }
  if (!supportsBatching(store)) return store;
  const claims = new Batcher<ClaimRequest, ClaimResult>(
    ({ key, fingerprint, leaseMs }) => store.claim(key, { fingerprint, leaseMs }),
    (requests) => store.claimMany(requests),
    maxBatch,
    maxInFlight,
    window,
  );
  const completes = new Batcher<CompleteRequest, boolean>(
    ({ key, token, outcome, retentionMs }) => store.complete(key, token, outcome, retentionMs),
    (requests) => store.completeMany(requests),
    maxBatch,
    maxInFlight,
    window,
  );
  // Explicit delegation, bound to the store: a class-based store may rely on `this` (private fields).
  const view: Store = {
    name: store.name,
    capabilities: store.capabilities,
    claim: (key, claimOptions) =>
      claims.add({ key, fingerprint: claimOptions.fingerprint, leaseMs: claimOptions.leaseMs }),
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
