/**
 * A store that times its own calls: the latency of every claim, completion and batch the engine sends,
 * and how many items each batch carried, as Prometheus histograms. It wraps any `Store` and changes
 * nothing else: same results, same errors, same capabilities, so batching works through it unchanged.
 * @module
 */
import { type Histogram, type Registry, register } from 'prom-client';
import { isReplicationShortError } from '../core/errors.js';
import { knownFields } from '../core/option-checks.js';
import { PartialBatchError } from '../store/partial-batch.js';
import type { Store } from '../store/store.js';
import { histogramBuckets, histogramIn, metricPrefix, storeLabel } from './metrics.js';

/** Options of {@link withStoreMetrics}. */
export interface StoreMetricsOptions {
  /** Where the metrics are registered. @default prom-client's global `register` */
  registry?: Registry;
  /** Prepended to every metric name. @default 'idempotency_' */
  prefix?: string;
  /**
   * The `store` label, to tell several stores apart: two stores wrapped on one registry need different
   * labels. @default the store's `name` ('redis', 'postgres', …)
   */
  label?: string;
  /** Buckets of `<prefix>store_call_seconds`, in seconds. @default 0.25 ms to 2.5 s */
  buckets?: readonly number[];
}

/** Default buckets of `store_call_seconds`: from a loopback Redis call to a store on the edge of its timeout. */
export const DEFAULT_STORE_CALL_BUCKETS: readonly number[] = [
  0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5,
];

// Items per batch call: a lone call up to the engine's default `maxBatch` of 100.
const BATCH_ITEM_BUCKETS = [1, 2, 5, 10, 20, 50, 100];

// Per latency histogram (one per registry and prefix): which store each `store` label times, and the
// labels already warned about. Weak references, because there is no unregistering: a store dropped by the
// application (a test's, a tenant's) must not be kept alive by the global registry.
const labelled = new WeakMap<
  Histogram<string>,
  { stores: Map<string, WeakRef<Store>>; warned: Set<string> }
>();

/**
 * Note that `store` is timed under `label` by `seconds`. Another live store under the same label (two
 * PostgreSQL stores, both `postgres` by default) draws one process warning per label, code
 * `IDEMPOTENCY_KIT_SHARED_STORE_LABEL`: their calls add up in one series. A warning, not a refusal: whether
 * the first store is still alive depends on the garbage collector (a store replaced without `close()`, a
 * test suite creating one per test on the global registry), and a startup must not fail by chance.
 * Returns what frees the label, for the wrapper's `close()`.
 */
function noteLabel(seconds: Histogram<string>, label: string, store: Store): () => void {
  let entry = labelled.get(seconds);
  if (entry === undefined) {
    entry = { stores: new Map(), warned: new Set() };
    labelled.set(seconds, entry);
  }
  const { stores, warned } = entry;
  const holder = stores.get(label)?.deref();
  if (holder !== undefined && holder !== store) {
    if (!warned.has(label)) {
      warned.add(label);
      process.emitWarning(
        `idempotency-kit: withStoreMetrics times another store under the label '${label}' in this ` +
          'registry: their calls add up in one series. Pass a distinct `label` option to each store.',
        { code: 'IDEMPOTENCY_KIT_SHARED_STORE_LABEL' },
      );
    }
    return () => {};
  }
  const reference =
    holder === undefined ? new WeakRef(store) : (stores.get(label) as WeakRef<Store>);
  stores.set(label, reference);
  return () => {
    if (stores.get(label) === reference) stores.delete(label);
  };
}

/** The store's operations, in the names the `operation` label uses. */
type Operation = Exclude<keyof Store, 'name' | 'capabilities' | 'close'>;

// Every key of StoreMetricsOptions, checked by the compiler both ways: a misspelt option is refused instead of
// leaving its default in force.
const WITH_STORE_METRICS_FIELDS = Object.keys({
  registry: true,
  prefix: true,
  label: true,
  buckets: true,
} as const satisfies Record<keyof StoreMetricsOptions, true>);

/**
 * Wrap `store` so that each of its calls is timed in `<prefix>store_call_seconds{store, operation,
 * result}` (`result` is `ok` or `error`), and each batch call's size is observed in
 * `<prefix>store_batch_items{store, operation}`. Pass the wrapper to `createIdempotency` (or an adapter)
 * instead of the store; keep the store itself for its own extras (`ready`, `size`, …).
 *
 * A batch call serves many runs: its latency is what each of them waited for the store, and
 * `store_batch_items` shows how many shared it.
 *
 * Each store needs its own `label` in a registry: wrapping a second store under a label another live one
 * holds (two PostgreSQL stores, both `postgres` by default) draws a process warning
 * (`IDEMPOTENCY_KIT_SHARED_STORE_LABEL`), since their calls add up in one series. The same store may be
 * wrapped again. A label is free again once its store is closed through the wrapper, or garbage-collected.
 *
 * @param options.registry where to register the metrics (default: prom-client's global `register`)
 * @param options.prefix prepended to every metric name (default `'idempotency_'`)
 * @param options.label the `store` label (default: the store's `name`)
 * @param options.buckets the latency histogram's buckets, in seconds
 * @throws InvalidOptionsError for a bad option, or a registry metric of the same name that does not fit.
 * @see docs/observability.md
 * @example
 * import { withStoreMetrics } from 'idempotency-kit/prometheus';
 * import { redisStore } from 'idempotency-kit/redis';
 *
 * const idempotency = createIdempotency({ store: withStoreMetrics(redisStore({ client })) });
 */
export function withStoreMetrics(store: Store, options: StoreMetricsOptions = {}): Store {
  knownFields(options, 'withStoreMetrics', WITH_STORE_METRICS_FIELDS);
  const prefix = metricPrefix(options.prefix, 'idempotency_', 'withStoreMetrics');
  const registry = options.registry ?? register;
  const label = storeLabel(options.label, store, 'withStoreMetrics');
  const buckets = histogramBuckets(options.buckets, DEFAULT_STORE_CALL_BUCKETS, 'withStoreMetrics');
  const seconds: Histogram<'store' | 'operation' | 'result'> = histogramIn(
    registry,
    `${prefix}store_call_seconds`,
    'Latency of store calls, by operation (a batch call serves every run in it).',
    ['store', 'operation', 'result'],
    buckets,
  );
  const items: Histogram<'store' | 'operation'> = histogramIn(
    registry,
    `${prefix}store_batch_items`,
    'Items per batch call of the store (claims and completions sent together).',
    ['store', 'operation'],
    BATCH_ITEM_BUCKETS,
  );
  // After the checks: a wrapper refused for another reason must not hold the label.
  const releaseLabel = noteLabel(seconds, label, store);

  /** `call` timed under `operation`; a synchronous throw is timed and rethrown as a rejection. */
  function timed<A extends unknown[], R>(
    operation: Operation,
    call: (...args: A) => Promise<R>,
  ): (...args: A) => Promise<R> {
    const ok = { store: label, operation, result: 'ok' } as const;
    const failed = { store: label, operation, result: 'error' } as const;
    const unconfirmed = { store: label, operation, result: 'unconfirmed' } as const;
    return (...args: A) => {
      const startedAt = performance.now();
      const observe = (labels: typeof ok | typeof failed | typeof unconfirmed) =>
        seconds.observe(labels, (performance.now() - startedAt) / 1000);
      let pending: Promise<R>;
      try {
        pending = call.apply(store, args);
      } catch (error) {
        pending = Promise.reject(error);
      }
      return pending.then(
        (value) => {
          observe(ok);
          return value;
        },
        (error: unknown) => {
          observe(appliedUnconfirmed(error) ? unconfirmed : failed);
          throw error;
        },
      );
    };
  }

  /** `call` timed under `operation`, with the number of items of each call observed. */
  function batched<A extends unknown[], R>(
    operation: Operation,
    call: (...args: A) => Promise<R>,
    size: (...args: A) => number,
  ): (...args: A) => Promise<R> {
    const send = timed(operation, call);
    const labels = { store: label, operation } as const;
    return (...args: A) => {
      items.observe(labels, size(...args));
      return send(...args);
    };
  }

  const wrapped: Store = {
    name: store.name,
    capabilities: store.capabilities,
    claim: timed('claim', store.claim),
    complete: timed('complete', store.complete),
    release: timed('release', store.release),
    extend: timed('extend', store.extend),
    get: timed('get', store.get),
    delete: timed('delete', store.delete),
    stats: timed('stats', store.stats),
  };
  // Optional methods only where the store has them: the engine decides what to send by their presence.
  if (store.purgeExpired !== undefined)
    wrapped.purgeExpired = timed('purgeExpired', store.purgeExpired);
  if (store.close !== undefined) {
    // A closed store's label is free for the store that replaces it (a failover to a new client).
    wrapped.close = () => {
      releaseLabel();
      return (store.close as () => Promise<void>).call(store);
    };
  }
  if (store.saveStep !== undefined) wrapped.saveStep = timed('saveStep', store.saveStep);
  if (store.loadSteps !== undefined) wrapped.loadSteps = timed('loadSteps', store.loadSteps);
  if (store.inspect !== undefined) wrapped.inspect = timed('inspect', store.inspect);
  if (store.listCrashed !== undefined) {
    wrapped.listCrashed = timed('listCrashed', store.listCrashed);
  }
  if (store.claimMany !== undefined) {
    wrapped.claimMany = batched('claimMany', store.claimMany, (requests) => requests.length);
  }
  if (store.completeMany !== undefined) {
    wrapped.completeMany = batched(
      'completeMany',
      store.completeMany,
      (requests) => requests.length,
    );
  }
  if (store.completeAndClaimMany !== undefined) {
    wrapped.completeAndClaimMany = batched(
      'completeAndClaimMany',
      store.completeAndClaimMany,
      (completes, claims) => completes.length + claims.length,
    );
  }
  return wrapped;
}

/**
 * Whether `error` answers a write the store applied but its replicas did not confirm (the Redis store's
 * `waitForReplicas`): a `ReplicationShortError`, or a batch whose items are all applied, some unconfirmed.
 * Timed as `unconfirmed`, not `error`: counted as errors, a lagging replica made store-error dashboards
 * spike for writes that had succeeded (they are also counted by `idempotency_replication_short_total`).
 */
function appliedUnconfirmed(error: unknown): boolean {
  return (
    isReplicationShortError(error) ||
    (error instanceof PartialBatchError && error.failed === 0 && error.unconfirmed > 0)
  );
}
