/**
 * Gauges of what a store holds, read from its `stats()` when Prometheus scrapes: records in progress and
 * completed, leases that ran out with nobody taking them over (crashed holders whose key no client has
 * retried), and the age of the oldest live lease (a handler running for far too long).
 * @module
 */

import { Gauge, type Registry, register } from 'prom-client';
import { MAX_TIMER_MS } from '../core/duration.js';
import { InvalidOptionsError } from '../core/errors.js';
import { knownFields } from '../core/option-checks.js';
import type { Store, StoreStats } from '../store/store.js';
import { metricIn, metricPrefix, storeLabel } from './metrics.js';

/** Options of {@link registerStoreStats}. */
export interface StoreStatsOptions {
  /** Where the gauges are registered. @default prom-client's global `register` */
  registry?: Registry;
  /** Prepended to every metric name. @default 'idempotency_' */
  prefix?: string;
  /** The `store` label, to tell several stores apart. @default the store's `name` */
  label?: string;
  /**
   * The longest a reading is reused, in ms: scrapes closer together than this share one `stats()` call
   * (on Redis a SCAN of the keyspace, on SQL stores a query over the table). @default 15_000
   */
  maxAgeMs?: number;
  /**
   * The longest a scrape waits for the store's `stats()`, in ms: past it the store reports no sample for
   * that scrape, so a store that hangs (a pool waiting for a connection, a blackholed server) never holds
   * up the whole `/metrics` answer. A call still running is not repeated before `maxAgeMs` (and this)
   * have passed: a store that does not answer gets no more calls than one that does. @default 5_000
   */
  timeoutMs?: number;
}

/** One store whose stats feed the gauges. */
interface Source {
  store: Store;
  maxAgeMs: number;
  timeoutMs: number;
  reading?: Reading;
}

/** One `stats()` call: when it started, what it gave (`undefined`: it failed), and whether it has. */
interface Reading {
  at: number;
  stats: Promise<StoreStats | undefined>;
  settled: boolean;
}

/** The stores feeding one pair of gauges, and the collection a scrape has in flight. */
interface Feed {
  sources: Map<string, Source>;
  inFlight?: Promise<void>;
}

// Per records gauge (one per registry and prefix): every store registered under it, kept on the gauge
// itself under a process-wide symbol, not in a map of this module. The gauge's `collect` is the closure of
// whichever copy of this module created it: with a map per copy, a store registered by another copy (two
// versions of the package installed side by side, a module graph a dev server evaluated again) went into
// a map that `collect` never read, and was silently never reported. Versioned: a copy whose `Feed`
// differs in shape must use another name (it then keeps feeds of its own, as before).
const FEED = Symbol.for('idempotency-kit.store-stats.feed.v1');

/** The feed of `records`, if a copy of this module made one. */
function feedOf(records: Gauge<'store' | 'status'>): Feed | undefined {
  return (records as unknown as { [FEED]?: Feed })[FEED];
}

/**
 * The source's stats, reusing a reading younger than `maxAgeMs` (one still running: younger than
 * `timeoutMs` too, so that a store that does not answer gets no more calls than one that does, and one
 * whose call never settles is still asked again); `undefined` when the store failed or did not answer
 * within `timeoutMs`.
 */
function readingOf(source: Source): Promise<StoreStats | undefined> {
  const now = Date.now();
  let reading = source.reading;
  const maxAgeMs = reading?.settled ? source.maxAgeMs : Math.max(source.maxAgeMs, source.timeoutMs);
  if (reading === undefined || now - reading.at >= maxAgeMs) {
    const started: Reading = { at: now, stats: Promise.resolve(undefined), settled: false };
    let call: Promise<StoreStats>;
    try {
      call = source.store.stats();
    } catch (error) {
      // A store that throws rather than rejects fails its own sample, not the whole scrape.
      call = Promise.reject(error);
    }
    started.stats = call.then(
      (stats) => {
        started.settled = true;
        return stats;
      },
      () => {
        started.settled = true;
        return undefined;
      },
    );
    source.reading = reading = started;
  }
  return reading.settled ? reading.stats : withinTimeout(reading.stats, source.timeoutMs);
}

/** `pending`, or `undefined` once `timeoutMs` has passed without it settling. */
function withinTimeout<T>(pending: Promise<T>, timeoutMs: number): Promise<T | undefined> {
  return new Promise((resolve) => {
    // Unref'd: a scrape waiting on a hung store must not keep the process alive at shutdown.
    const timer = setTimeout(() => resolve(undefined), timeoutMs);
    timer.unref();
    void pending.then((value) => {
      clearTimeout(timer);
      resolve(value);
    });
  });
}

// Every key of StoreStatsOptions, checked by the compiler both ways: a misspelt option is refused instead of
// leaving its default in force.
const REGISTER_STORE_STATS_FIELDS = Object.keys({
  registry: true,
  prefix: true,
  label: true,
  maxAgeMs: true,
  timeoutMs: true,
} as const satisfies Record<keyof StoreStatsOptions, true>);

/**
 * Register gauges that report what `store` holds, read from its `stats()` at scrape time:
 *
 * | metric | labels | value |
 * |---|---|---|
 * | `idempotency_store_records` | `store`, `status` | records `in_progress`, `completed`, and `stale_lease` (in progress, lease ended, not taken over) |
 * | `idempotency_store_oldest_lease_age_seconds` | `store` | age of the oldest live in-progress record (0 when none) |
 *
 * A scrape while the store is unreachable, or slower than `timeoutMs`, reports no sample for it rather
 * than an old one. Register each store once (several stores under different `label`s share the gauges);
 * call the returned function to stop reading it (before closing it, say).
 *
 * @param options.registry where to register the gauges (default: prom-client's global `register`)
 * @param options.prefix prepended to every metric name (default `'idempotency_'`)
 * @param options.label the `store` label (default: the store's `name`)
 * @param options.maxAgeMs the longest a `stats()` reading is reused (default 15 s)
 * @param options.timeoutMs the longest a scrape waits for `stats()` (default 5 s)
 * @see docs/observability.md
 * @example
 * import { registerStoreStats } from 'idempotency-kit/prometheus';
 *
 * registerStoreStats(store);
 * // alert: idempotency_store_records{status="stale_lease"} > 0 for 15m
 */
export function registerStoreStats(store: Store, options: StoreStatsOptions = {}): () => void {
  knownFields(options, 'registerStoreStats', REGISTER_STORE_STATS_FIELDS);
  const prefix = metricPrefix(options.prefix, 'idempotency_', 'registerStoreStats');
  const registry = options.registry ?? register;
  const label = storeLabel(options.label, store, 'registerStoreStats');
  const maxAgeMs = options.maxAgeMs ?? 15_000;
  if (typeof maxAgeMs !== 'number' || !(maxAgeMs >= 0)) {
    throw new InvalidOptionsError(
      'registerStoreStats: `maxAgeMs` must be a number of ms, 0 or more',
    );
  }
  const timeoutMs = options.timeoutMs ?? 5_000;
  // Above 2^31-1 ms Node fires a timer at once: every scrape would report no sample for the store.
  if (typeof timeoutMs !== 'number' || !(timeoutMs > 0) || timeoutMs > MAX_TIMER_MS) {
    throw new InvalidOptionsError(
      `registerStoreStats: \`timeoutMs\` must be a positive number of ms, at most ${MAX_TIMER_MS}`,
    );
  }

  const recordsName = `${prefix}store_records`;
  const ageName = `${prefix}store_oldest_lease_age_seconds`;
  const records = metricIn(
    registry,
    recordsName,
    Gauge,
    () =>
      new Gauge<'store' | 'status'>({
        name: recordsName,
        help: 'Records the store holds, by status (stale_lease: in progress, lease ended, not taken over).',
        labelNames: ['store', 'status'],
        registers: [registry],
        async collect() {
          await collectOnce(this, age);
        },
      }),
    ['store', 'status'],
  ) as Gauge<'store' | 'status'>;
  const age = metricIn(
    registry,
    ageName,
    Gauge,
    () =>
      new Gauge<'store'>({
        name: ageName,
        help: 'Age of the oldest live in-progress record, in seconds (0 when there is none).',
        labelNames: ['store'],
        registers: [registry],
        async collect() {
          await collectOnce(records, this);
        },
      }),
    ['store'],
  ) as Gauge<'store'>;

  let feed = feedOf(records);
  if (feed === undefined) {
    feed = { sources: new Map() };
    // Not enumerable: nothing that walks the metric (a serializer, a deep equality) sees it.
    Object.defineProperty(records, FEED, { value: feed });
  }
  const { sources } = feed;
  if (sources.has(label)) {
    throw new InvalidOptionsError(
      `registerStoreStats: a store labelled '${label}' is registered already; pass another \`label\``,
    );
  }
  const source: Source = { store, maxAgeMs, timeoutMs };
  sources.set(label, source);
  // A store closed at shutdown, or replaced (a failover to a new client), stops being read; its label can
  // be registered again. Only this registration is removed, whatever was registered since.
  return () => {
    if (sources.get(label) === source) sources.delete(label);
  };
}

/**
 * Set both gauges from one reading of every store. A scrape collects its metrics concurrently, so the two
 * gauges' `collect` calls share the collection in flight instead of reading the stores twice.
 */
function collectOnce(records: Gauge<'store' | 'status'>, age: Gauge<'store'>): Promise<void> {
  const feed = feedOf(records);
  if (feed === undefined) return Promise.resolve();
  feed.inFlight ??= collectAll(feed.sources, records, age).finally(() => {
    feed.inFlight = undefined;
  });
  return feed.inFlight;
}

/** Read every store (concurrently) and set both gauges from the readings. */
async function collectAll(
  sources: Map<string, Source>,
  records: Gauge<'store' | 'status'>,
  age: Gauge<'store'>,
): Promise<void> {
  const readings = await Promise.all(
    [...sources].map(async ([label, source]) => [label, await readingOf(source)] as const),
  );
  // Reset only now, with every reading in hand: a scrape never sees the gauges half set.
  records.reset();
  age.reset();
  for (const [store, stats] of readings) {
    if (stats === undefined) continue;
    records.set({ store, status: 'in_progress' }, stats.inProgress);
    records.set({ store, status: 'completed' }, stats.completed);
    records.set({ store, status: 'stale_lease' }, stats.staleLeases);
    age.set({ store }, (stats.oldestLeaseAgeMs ?? 0) / 1000);
  }
}
