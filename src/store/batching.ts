/**
 * Coalesces concurrent `claim` and `complete` calls into `claimMany` / `completeMany` batches, so that a
 * burst of deliveries (a consumer's prefetch, a busy API) costs one store round trip per batch instead of
 * one per key, while a lone call is still sent at once. Semantics are unchanged: each item is applied
 * exactly as a single call would be.
 * @module
 */
import { InvalidOptionsError } from '../core/errors.js';
import type { ClaimResult } from '../core/record.js';
import { assertClaimDurations, assertPositiveMs } from './durations.js';
import { eventLoopBusy } from './event-loop-load.js';
import { partialResults } from './partial-batch.js';
import type {
  BatchWindow,
  ClaimRequest,
  CompleteAndClaimResults,
  CompleteRequest,
  Store,
} from './store.js';

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
   * Store calls outstanding at once while this thread's event loop is busy (80% or more of the last
   * 100 ms spent running code, see `event-loop-load.ts`), never more than `maxInFlight`. A CPU-bound
   * process gains more from fewer, larger batches than from parallel calls; an idle one keeps
   * `maxInFlight`, so a quiet service still sends each call at once. @default maxInFlight (no change
   * under load)
   */
  maxInFlightWhenBusy?: number;
  /**
   * Which calls wait for each other: those of one event-loop tick (`'tick'`), or every call of one turn
   * of the event loop (`'turn'`: for a synchronous store such as SQLite, where a batch is one transaction;
   * measured on Express S2, server CPU +247 → +40 µs per request over the baseline). The built-in stores
   * ask for the turn only while the loop is busy ({@link BatchingOptions.windowWhenBusy}).
   * @default 'tick'
   */
  window?: BatchWindow;
  /**
   * The window while this thread's event loop is busy (as for `maxInFlightWhenBusy`). `'turn'` for a store
   * whose calls answer synchronously (the memory store): with a tick-sized window each HTTP request then
   * ran from its socket read to its response write alone, and batches never formed; under load, a turn's
   * requests are claimed, run and answered together (Express S2 server CPU +115 → +35 µs per request over
   * the baseline, `bench/http-cpu.ts`, same run), while an idle loop keeps the tick and its latency (S1:
   * `'turn'` at all times cost 2–3 points of throughput, this none). @default window
   */
  windowWhenBusy?: BatchWindow;
}

/**
 * The event loop's own `setImmediate`, taken when this module loads: a test's fake timers (vitest's
 * `vi.useFakeTimers()` fakes `setImmediate` by default) replace the global later, and a `'turn'` window
 * scheduled on the fake one would hold every store call until the test advanced its clock, which it never
 * does for work it did not schedule itself: the call, and the test, would wait forever.
 */
const realSetImmediate = globalThis.setImmediate;

/** Calls of one kind waiting to be sent, kept as three parallel arrays (see {@link Batcher}). */
class Lane<Req, Res> {
  requests: Req[] = [];
  resolves: Array<(value: Res) => void> = [];
  rejects: Array<(error: unknown) => void> = [];

  push(request: Req, resolve: (value: Res) => void, reject: (error: unknown) => void): void {
    this.requests.push(request);
    this.resolves.push(resolve);
    this.rejects.push(reject);
  }

  /** The first `max` waiting calls, handed over whole when they all fit (no copy). */
  take(max: number): Lane<Req, Res> {
    const taken = new Lane<Req, Res>();
    if (this.requests.length <= max) {
      ({ requests: taken.requests, resolves: taken.resolves, rejects: taken.rejects } = this);
      this.requests = [];
      this.resolves = [];
      this.rejects = [];
    } else {
      taken.requests = this.requests.splice(0, max);
      taken.resolves = this.resolves.splice(0, max);
      taken.rejects = this.rejects.splice(0, max);
    }
    return taken;
  }

  /**
   * Give each caller its result, or fail them all when the store's answer is not one result per call.
   * Checked, never trusted: a custom store's wrong answer (not an array, or a `completeAndClaimMany` that
   * left a list out) thrown from here would settle no caller, and every one of them would wait forever.
   */
  resolve(results: unknown): void {
    const count = this.requests.length;
    if (!Array.isArray(results) || results.length !== count) {
      const got = Array.isArray(results) ? `${results.length} results` : String(results);
      this.reject(new Error(`batch returned ${got} for ${count} items`));
      return;
    }
    for (let i = 0; i < count; i++) (this.resolves[i] as (value: Res) => void)(results[i] as Res);
  }

  reject(error: unknown): void {
    for (const reject of this.rejects) reject(error);
  }

  /**
   * The store call failed: each caller gets its own item's result or error when the store reported them
   * (`partial`, see `partial-batch.ts`), else every caller gets the call's error.
   */
  fail(error: unknown, partial: unknown): void {
    const count = this.requests.length;
    if (!Array.isArray(partial) || partial.length !== count) {
      this.reject(error);
      return;
    }
    for (let i = 0; i < count; i++) {
      const item: unknown = partial[i];
      if (item instanceof Error) (this.rejects[i] as (error: unknown) => void)(item);
      else (this.resolves[i] as (value: Res) => void)(item as Res);
    }
  }
}

/** How a {@link Batcher} reaches the store. */
interface Senders {
  claimOne(request: ClaimRequest): Promise<ClaimResult>;
  claimMany(requests: ClaimRequest[]): Promise<ClaimResult[]>;
  completeOne(request: CompleteRequest): Promise<boolean>;
  completeMany(requests: CompleteRequest[]): Promise<boolean[]>;
  /** Both kinds in one call, when the store can ({@link Store.completeAndClaimMany}). */
  completeAndClaimMany?: Store['completeAndClaimMany'];
}

/**
 * Natural batching: the calls made in one event-loop tick (a burst: one socket read's deliveries, a clump of
 * requests) are held until that tick ends and go together; a lone call goes at the end of its own tick,
 * which adds no wait worth the name (it is the same turn of the event loop). While fewer than
 * `maxInFlight` store calls are outstanding, what is pending is sent at once; calls that arrive while the
 * store is busy wait, and go together as soon as a call returns. Under load the batches grow by
 * themselves; at rest nothing waits beyond the current tick.
 *
 * A batcher holds claims and completions in two lanes. For a store with
 * {@link Store.completeAndClaimMany}, one batcher takes both kinds, and what waits in both lanes goes as
 * one call: completions first (they were asked for earlier, and a claim of the same key must see them),
 * then claims. Under load, each store call then carries one request's completion and another's claim
 * together: one round trip, and for PostgreSQL one statement and one commit, instead of two. A store
 * without it gets one batcher per kind, each using one lane.
 *
 * Why the first call of a tick is not sent ahead of the others: it bought no latency and cost a round trip.
 * node-redis writes its commands in a `setImmediate`, so the first call left in the same write as the
 * batch behind it, and on the consumer bench the extra script call per burst cost Redis and Node about
 * 2 µs per message (`bench/consumers.ts`: 55% → 65% of the plain consumer). PostgreSQL, whose client
 * writes at once, measured no better with it either.
 *
 * Pending calls are kept in parallel arrays rather than as one object per call: every message goes
 * through here twice (claim and complete), and the arrays of a batch are handed over whole when they fit
 * in one (no copy, no `map` to pick the requests out).
 */
class Batcher {
  private readonly claims = new Lane<ClaimRequest, ClaimResult>();
  private readonly completes = new Lane<CompleteRequest, boolean>();
  private inFlight = 0;
  /** True while a flush at the end of the current tick is scheduled. */
  private scheduled = false;

  constructor(
    private readonly send: Senders,
    private readonly maxBatch: number,
    private readonly maxInFlight: number,
    private readonly maxInFlightWhenBusy: number,
    private readonly window: BatchWindow,
    private readonly windowWhenBusy: BatchWindow,
  ) {}

  claim(request: ClaimRequest): Promise<ClaimResult> {
    return new Promise<ClaimResult>((resolve, reject) => {
      this.claims.push(request, resolve, reject);
      this.schedule();
    });
  }

  complete(request: CompleteRequest): Promise<boolean> {
    return new Promise<boolean>((resolve, reject) => {
      this.completes.push(request, resolve, reject);
      this.schedule();
    });
  }

  /** Every call of a tick (or of a turn) is held until its end, and they go together. */
  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    // The gauge is read only when it can change the answer (see `limit`).
    const turn = this.window === 'turn' || (this.windowWhenBusy === 'turn' && eventLoopBusy());
    if (turn) realSetImmediate(this.endOfTick);
    else process.nextTick(this.endOfTick);
  }

  private readonly endOfTick = (): void => {
    this.scheduled = false;
    this.pump();
  };

  // What waited goes at the end of the tick in which a call returned, not at once: the callers that call
  // resolved continue in that tick's microtasks, and the calls they make next (the completion after a
  // claim) join what waited. Sent at once, those calls would wait for the call after it.
  private readonly returned = (): void => {
    this.inFlight--;
    this.schedule();
  };

  private pump(): void {
    while (
      (this.claims.requests.length > 0 || this.completes.requests.length > 0) &&
      this.inFlight < this.limit()
    ) {
      const completes = this.completes.take(this.maxBatch);
      const claims = this.claims.take(this.maxBatch);
      this.inFlight++;
      this.dispatch(completes, claims).finally(this.returned);
    }
  }

  /**
   * How many calls may be outstanding now. With none outstanding the answer cannot hold anything back,
   * so the gauge is not read: a quiet service's lone calls never ask.
   */
  private limit(): number {
    if (this.inFlight === 0 || this.maxInFlightWhenBusy === this.maxInFlight)
      return this.maxInFlight;
    return eventLoopBusy() ? this.maxInFlightWhenBusy : this.maxInFlight;
  }

  /** One store call for what was taken, or one per kind when the store cannot take both at once. */
  private dispatch(
    completes: Lane<CompleteRequest, boolean>,
    claims: Lane<ClaimRequest, ClaimResult>,
  ): Promise<unknown> {
    const both = this.send.completeAndClaimMany;
    if (completes.requests.length > 0 && claims.requests.length > 0 && both !== undefined) {
      return callStore(() => both(completes.requests, claims.requests)).then(
        (results) => {
          // `?.`: a custom store's malformed answer fails its callers (see Lane.resolve), never throws.
          completes.resolve(results?.completed);
          claims.resolve(results?.claimed);
        },
        (error: unknown) => {
          const partial = partialResults(error) as Partial<CompleteAndClaimResults> | undefined;
          completes.fail(error, partial?.completed);
          claims.fail(error, partial?.claimed);
        },
      );
    }
    return Promise.all([
      completes.requests.length === 0
        ? undefined
        : sendLane(completes, this.send.completeOne, this.send.completeMany),
      claims.requests.length === 0
        ? undefined
        : sendLane(claims, this.send.claimOne, this.send.claimMany),
    ]);
  }
}

/**
 * A store call whose synchronous throw (a store's bug, a bad argument checked eagerly) becomes its
 * rejection: thrown inside the end-of-tick flush, it would escape every caller and crash the process.
 */
function callStore<T>(send: () => Promise<T>): Promise<T> {
  try {
    return send();
  } catch (error) {
    return Promise.reject(error);
  }
}

/** Send one lane's calls: a lone call as a single store call, more as a batch. */
function sendLane<Req, Res>(
  lane: Lane<Req, Res>,
  one: (request: Req) => Promise<Res>,
  many: (requests: Req[]) => Promise<Res[]>,
): Promise<void> {
  const sent =
    lane.requests.length === 1
      ? callStore(() => one(lane.requests[0] as Req)).then((result) => [result])
      : callStore(() => many(lane.requests));
  return sent.then(
    (results) => lane.resolve(results),
    (error: unknown) => lane.fail(error, partialResults(error)),
  );
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
 *
 * A `claim` or `complete` with an invalid duration (see {@link Store}) rejects with `InvalidOptionsError`
 * before it is queued, so it fails alone: the store would refuse a whole batch for one such item, and every
 * other caller of that tick with it.
 */
export function withBatching(store: Store, options: BatchingOptions = {}): Store {
  const maxBatch = options.maxBatch ?? 100;
  const maxInFlight = options.maxInFlight ?? 4;
  const maxInFlightWhenBusy = options.maxInFlightWhenBusy ?? maxInFlight;
  const window = options.window ?? 'tick';
  const windowWhenBusy = options.windowWhenBusy ?? window;
  // Checked even for a store that takes no batches: the same options must not fail later on another store.
  // A zero would never send anything (maxInFlight) or send empty batches forever (maxBatch).
  for (const [name, value] of [
    ['maxBatch', maxBatch],
    ['maxInFlight', maxInFlight],
    ['maxInFlightWhenBusy', maxInFlightWhenBusy],
  ] as const) {
    if (!(Number.isSafeInteger(value) && value > 0)) {
      throw new InvalidOptionsError(
        `batch.${name} must be a positive integer, got ${String(value)}`,
      );
    }
  }
  for (const [name, value] of [
    ['window', window],
    ['windowWhenBusy', windowWhenBusy],
  ] as const) {
    if (value !== 'tick' && value !== 'turn') {
      throw new InvalidOptionsError(`batch.${name} must be 'tick' or 'turn', got ${String(value)}`);
    }
  }
  if (!supportsBatching(store)) return store;
  // Never above maxInFlight: a caller who lowered maxInFlight below a store's default for busy times
  // (or asked for 1) means it at all times.
  const busyLimit = Math.min(maxInFlightWhenBusy, maxInFlight);
  const send: Senders = {
    claimOne: ({ key, fingerprint, leaseMs, reserveMs }) =>
      store.claim(key, { fingerprint, leaseMs, reserveMs }),
    claimMany: (requests) => store.claimMany(requests),
    completeOne: ({ key, token, outcome, retentionMs }) =>
      store.complete(key, token, outcome, retentionMs),
    completeMany: (requests) => store.completeMany(requests),
  };
  let claims: Batcher;
  let completes: Batcher;
  if (store.completeAndClaimMany === undefined) {
    claims = new Batcher(send, maxBatch, maxInFlight, busyLimit, window, windowWhenBusy);
    completes = new Batcher(send, maxBatch, maxInFlight, busyLimit, window, windowWhenBusy);
  } else {
    const both = store.completeAndClaimMany.bind(store);
    claims = new Batcher(
      { ...send, completeAndClaimMany: both },
      maxBatch,
      maxInFlight,
      busyLimit,
      window,
      windowWhenBusy,
    );
    completes = claims;
  }
  // The stores' own checks, run per caller: a batch is refused whole for one invalid item (the contract),
  // and the callers it holds share nothing but the tick they called in.
  const who = `withBatching(${store.name})`;
  // Explicit delegation, bound to the store: a class-based store may rely on `this` (private fields).
  const view: Store = {
    name: store.name,
    capabilities: store.capabilities,
    // A refused call rejects (stores reject, they do not throw) and is never queued.
    claim: (key, claimOptions) => {
      try {
        assertClaimDurations(claimOptions, who);
      } catch (error) {
        return Promise.reject(error);
      }
      return claims.claim({
        key,
        fingerprint: claimOptions.fingerprint,
        leaseMs: claimOptions.leaseMs,
        reserveMs: claimOptions.reserveMs,
      });
    },
    complete: (key, token, outcome, retentionMs) => {
      try {
        assertPositiveMs(retentionMs, 'retentionMs', who);
      } catch (error) {
        return Promise.reject(error);
      }
      return completes.complete({ key, token, outcome, retentionMs });
    },
    release: (key, token) => store.release(key, token),
    extend: (key, token, leaseMs) => store.extend(key, token, leaseMs),
    get: (key) => store.get(key),
    delete: (key) => store.delete(key),
    stats: () => store.stats(),
    claimMany: (requests) => store.claimMany(requests),
    completeMany: (requests) => store.completeMany(requests),
  };
  const { inspect } = store;
  if (inspect !== undefined) view.inspect = (key) => inspect.call(store, key);
  const { listCrashed } = store;
  if (listCrashed !== undefined) view.listCrashed = (page) => listCrashed.call(store, page);
  const { saveStep, loadSteps } = store;
  if (saveStep !== undefined && loadSteps !== undefined) {
    view.saveStep = (key, token, name, value) => saveStep.call(store, key, token, name, value);
    view.loadSteps = (key, token) => loadSteps.call(store, key, token);
  }
  if (store.completeAndClaimMany !== undefined) {
    const both = store.completeAndClaimMany.bind(store);
    view.completeAndClaimMany = (completeRequests, claimRequests) =>
      both(completeRequests, claimRequests);
  }
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
