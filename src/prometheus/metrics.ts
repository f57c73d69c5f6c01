/**
 * The Prometheus metrics the hooks feed: their names, help texts and labels, and how they are found again
 * in a registry, so several engines (an HTTP layer and a consumer, or one engine per route) can share one
 * set of series, told apart by their `namespace` label.
 * @module
 */
import { Counter, type Gauge, Histogram, type Registry } from 'prom-client';
import { InvalidOptionsError } from '../core/errors.js';

/** The metrics `prometheusHooks` updates. */
export interface IdempotencyMetrics {
  /** `<prefix>runs_total{namespace, outcome}`: every run, by how it ended. */
  runs: Counter<'namespace' | 'outcome'>;
  /** `<prefix>cache_replays_total{namespace}`: replays answered by the local cache, with no store call. */
  cacheReplays: Counter<'namespace'>;
  /** `<prefix>takeovers_total{namespace}`: claims that took over a crashed attempt's expired lease. */
  takeovers: Counter<'namespace'>;
  /** `<prefix>leases_lost_total{namespace}`: executions that lost their lease (or gave it up past `maxExecution`). */
  leasesLost: Counter<'namespace'>;
  /** `<prefix>store_errors_total{namespace, operation}`: failed store calls, by store operation. */
  storeErrors: Counter<'namespace' | 'operation'>;
  /** `<prefix>execution_seconds{namespace, outcome}`: how long `fn` ran, for `executed` and `failed` runs. */
  executionSeconds: Histogram<'namespace' | 'outcome'>;
  /**
   * `<prefix>steps_total{namespace, result}`: steps (`ctx.step`) by `result`: `recorded` (the function ran
   * and its result was recorded) or `replayed` (a crashed attempt's recorded result was returned). No step
   * name label: names may be built from data, and a label per name could grow without bound.
   */
  steps: Counter<'namespace' | 'result'>;
  /**
   * `<prefix>replication_short_total{namespace, operation}`: writes made after the handler ran (`complete`,
   * `release`, `saveStep`) that the store applied but fewer replicas than it waits for confirmed in time
   * (the Redis store's `waitForReplicas`): a failover before the replicas catch up can lose them.
   */
  replicationShort: Counter<'namespace' | 'operation'>;
}

/** The `result` label of `<prefix>steps_total`. */
export const StepResultName = {
  /** The step's function ran and its result was recorded (`onStepRecorded`). */
  Recorded: 'recorded',
  /** A crashed attempt's recorded result was returned instead (`onStepReplayed`). */
  Replayed: 'replayed',
} as const;

/** Default buckets of `execution_seconds`: from a fast local write to a slow payment provider call. */
export const DEFAULT_EXECUTION_BUCKETS: readonly number[] = [
  0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30,
];

type AnyMetric = Counter<string> | Histogram<string> | Gauge<string>;

/**
 * The metric called `name` in `registry`: the one registered there already (by an earlier call, for
 * another engine or consumer), else a new one. An existing metric of another kind, or with other labels
 * (the application's own, another version of this package), is a configuration error, reported now: with
 * other labels, every update would throw, and a store wrapped by `withStoreMetrics` would fail every call.
 */
export function metricIn<M extends AnyMetric>(
  registry: Registry,
  name: string,
  kind: abstract new (...args: never[]) => M,
  create: () => M,
  labelNames: readonly string[] = [],
): M {
  const existing = registry.getSingleMetric(name);
  if (existing === undefined) return create();
  if (!(existing instanceof kind)) {
    throw new InvalidOptionsError(
      `prometheus: the registry already has a metric "${name}" that is not a ${kind.name}; ` +
        'choose another `prefix` (or another registry)',
    );
  }
  // prom-client keeps the label names on the metric, though its types do not show them.
  const existingLabels =
    (existing as unknown as { labelNames?: readonly string[] }).labelNames ?? [];
  if ([...existingLabels].sort().join() !== [...labelNames].sort().join()) {
    throw new InvalidOptionsError(
      `prometheus: the registry already has a metric "${name}" with the labels ` +
        `[${existingLabels.join(', ')}], not [${labelNames.join(', ')}]; ` +
        'choose another `prefix` (or another registry)',
    );
  }
  return existing;
}

/** The counter called `name` in `registry`, found or created (see `metricIn`). */
export function counterIn<L extends string>(
  registry: Registry,
  name: string,
  help: string,
  labelNames: readonly L[],
): Counter<L> {
  return metricIn(
    registry,
    name,
    Counter,
    () => new Counter<L>({ name, help, labelNames, registers: [registry] }),
    labelNames,
  ) as Counter<L>;
}

/** The histogram called `name` in `registry`, found or created (see `metricIn`). */
export function histogramIn<L extends string>(
  registry: Registry,
  name: string,
  help: string,
  labelNames: readonly L[],
  buckets: readonly number[],
): Histogram<L> {
  const histogram = metricIn(
    registry,
    name,
    Histogram,
    () =>
      new Histogram<L>({ name, help, labelNames, buckets: [...buckets], registers: [registry] }),
    labelNames,
  ) as Histogram<L>;
  // prom-client keeps the bounds on the metric, though its types do not show them. Sharing a histogram
  // whose bounds differ would silently observe into the first caller's buckets, not the ones asked for.
  const bounds = (histogram as unknown as { upperBounds?: readonly number[] }).upperBounds;
  if (bounds !== undefined && bounds.join() !== [...buckets].sort((a, b) => a - b).join()) {
    throw new InvalidOptionsError(
      `prometheus: the registry already has a histogram "${name}" with the buckets [${bounds.join(', ')}], ` +
        `not [${buckets.join(', ')}]; pass the same buckets, or another \`prefix\` (or registry)`,
    );
  }
  return histogram;
}

const METRIC_PREFIX = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;

/**
 * `prefix` as given, or `fallback`, checked to start a valid Prometheus metric name.
 * @throws InvalidOptionsError otherwise.
 */
export function metricPrefix(prefix: unknown, fallback: string, factory: string): string {
  const value = prefix ?? fallback;
  if (typeof value !== 'string' || (value !== '' && !METRIC_PREFIX.test(value))) {
    throw new InvalidOptionsError(
      `${factory}: \`prefix\` must be a valid start of a Prometheus metric name ([a-zA-Z_:][a-zA-Z0-9_:]*)`,
    );
  }
  return value;
}

/**
 * The `store` label: `label` as given, or the store's own `name`, checked to be a non-empty string.
 * @throws InvalidOptionsError otherwise.
 */
export function storeLabel(label: unknown, store: { name: string }, factory: string): string {
  const value = label ?? store.name;
  if (typeof value !== 'string' || value === '') {
    throw new InvalidOptionsError(`${factory}: \`label\` must be a non-empty string`);
  }
  return value;
}

/**
 * `buckets` as given, or `fallback`, checked to be positive numbers of seconds.
 * @throws InvalidOptionsError otherwise.
 */
export function histogramBuckets(
  buckets: readonly number[] | undefined,
  fallback: readonly number[],
  factory: string,
): readonly number[] {
  const value = buckets ?? fallback;
  if (!Array.isArray(value) || value.some((b) => typeof b !== 'number' || !(b > 0))) {
    throw new InvalidOptionsError(`${factory}: \`buckets\` must be positive numbers of seconds`);
  }
  return value;
}

/** Find or create every metric under `prefix` in `registry`. */
export function idempotencyMetrics(
  registry: Registry,
  prefix: string,
  buckets: readonly number[],
): IdempotencyMetrics {
  const counter = <L extends string>(suffix: string, help: string, labelNames: readonly L[]) =>
    counterIn(registry, `${prefix}${suffix}`, help, labelNames);
  return {
    runs: counter(
      'runs_total',
      'Idempotent runs (HTTP requests with a key, consumed messages), by how they ended.',
      ['namespace', 'outcome'],
    ),
    cacheReplays: counter(
      'cache_replays_total',
      'Replays answered from the local cache of completed records, without a store call.',
      ['namespace'],
    ),
    takeovers: counter(
      'takeovers_total',
      'Claims that took over an attempt whose lease had expired (its holder crashed or hung).',
      ['namespace'],
    ),
    leasesLost: counter(
      'leases_lost_total',
      'Executions that lost their lease, or gave it up past maxExecution (a newer attempt may take the key).',
      ['namespace'],
    ),
    storeErrors: counter('store_errors_total', 'Store calls that failed, by operation.', [
      'namespace',
      'operation',
    ]),
    executionSeconds: histogramIn(
      registry,
      `${prefix}execution_seconds`,
      'How long the protected function ran, for executed and failed runs.',
      ['namespace', 'outcome'],
      buckets,
    ),
    steps: counter(
      'steps_total',
      "Steps of executions: recorded (ran and recorded) or replayed (a crashed attempt's result returned).",
      ['namespace', 'result'],
    ),
    replicationShort: counter(
      'replication_short_total',
      'Writes made after the handler ran (complete, release, saveStep) that the store applied but fewer replicas than required confirmed in time (Redis waitForReplicas), by operation.',
      ['namespace', 'operation'],
    ),
  };
}
