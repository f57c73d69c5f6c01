/**
 * Engine hooks that count every run in Prometheus metrics (prom-client): the counters of the design's
 * observability checklist (new, replayed, conflict, mismatch, takeover, store error, write short of its
 * replicas) and how long the protected function ran. Only hashed storage keys reach the hooks; no metric carries a key at all, so
 * the series stay few whatever the traffic.
 * @module
 */
import { type Registry, register } from 'prom-client';
import { type IdempotencyHooks, RunOutcomeName } from '../core/hooks.js';
import { knownFields } from '../core/option-checks.js';
import {
  DEFAULT_EXECUTION_BUCKETS,
  histogramBuckets,
  type IdempotencyMetrics,
  idempotencyMetrics,
  metricPrefix,
  StepResultName,
} from './metrics.js';

/** Options of {@link prometheusHooks}. */
export interface PrometheusHooksOptions {
  /** Where the metrics are registered. @default prom-client's global `register` */
  registry?: Registry;
  /** Prepended to every metric name. @default 'idempotency_' */
  prefix?: string;
  /** Buckets of `<prefix>execution_seconds`, in seconds. @default 5 ms to 30 s */
  buckets?: readonly number[];
}

/** The hooks, and the metrics they update (to read in tests or to add your own labels' views). */
export interface PrometheusHooks extends IdempotencyHooks {
  /** The metrics these hooks update. */
  readonly metrics: IdempotencyMetrics;
}

// Every key of PrometheusHooksOptions, checked by the compiler both ways: a misspelt option is refused instead of
// leaving its default in force.
const PROMETHEUS_HOOKS_FIELDS = Object.keys({
  registry: true,
  prefix: true,
  buckets: true,
} as const satisfies Record<keyof PrometheusHooksOptions, true>);

/**
 * Hooks that count every run of an engine in Prometheus metrics. Pass them as `hooks` to
 * `createIdempotency`, to an HTTP adapter or to a consumer (through its `idempotency` options), alone or
 * with others through `combineHooks`. Engines that share a registry share the metrics: their series are
 * told apart by the `namespace` label.
 *
 * | metric | labels | counts |
 * |---|---|---|
 * | `idempotency_runs_total` | `namespace`, `outcome` | every run: `executed`, `replayed`, `in_progress`, `mismatch`, `failed`, `fail_open` |
 * | `idempotency_cache_replays_total` | `namespace` | replays answered from the local cache |
 * | `idempotency_takeovers_total` | `namespace` | claims over a crashed attempt's expired lease |
 * | `idempotency_leases_lost_total` | `namespace` | executions that lost their lease (or gave it up past `maxExecution`) |
 * | `idempotency_store_errors_total` | `namespace`, `operation` | failed store calls |
 * | `idempotency_execution_seconds` | `namespace`, `outcome` | histogram of `fn`'s duration (`executed`, `failed`) |
 * | `idempotency_steps_total` | `namespace`, `result` | steps (`ctx.step`): `recorded`, or `replayed` after a crash |
 * | `idempotency_replication_short_total` | `namespace`, `operation` | writes after the handler ran that fewer replicas than required confirmed (Redis `waitForReplicas`) |
 *
 * @param options.registry where to register the metrics (default: prom-client's global `register`)
 * @param options.prefix prepended to every metric name (default `'idempotency_'`)
 * @param options.buckets the duration histogram's buckets, in seconds
 * @see docs/observability.md
 * @example
 * import express from 'express';
 * import { register } from 'prom-client';
 * import { idempotency } from 'idempotency-kit/express';
 * import { prometheusHooks } from 'idempotency-kit/prometheus';
 *
 * const idem = idempotency({ store, hooks: prometheusHooks() });
 * app.get('/metrics', async (_req, res) => {
 *   res.type(register.contentType).send(await register.metrics());
 * });
 */
export function prometheusHooks(options: PrometheusHooksOptions = {}): PrometheusHooks {
  knownFields(options, 'prometheusHooks', PROMETHEUS_HOOKS_FIELDS);
  const prefix = metricPrefix(options.prefix, 'idempotency_', 'prometheusHooks');
  const buckets = histogramBuckets(options.buckets, DEFAULT_EXECUTION_BUCKETS, 'prometheusHooks');
  const metrics = idempotencyMetrics(options.registry ?? register, prefix, buckets);
  const {
    runs,
    cacheReplays,
    takeovers,
    leasesLost,
    storeErrors,
    executionSeconds,
    steps,
    replicationShort,
  } = metrics;

  return {
    metrics,
    onExecuted({ namespace, durationMs }) {
      runs.inc({ namespace, outcome: RunOutcomeName.Executed });
      executionSeconds.observe({ namespace, outcome: RunOutcomeName.Executed }, durationMs / 1000);
    },
    onReplayed({ namespace, fromCache }) {
      runs.inc({ namespace, outcome: RunOutcomeName.Replayed });
      if (fromCache) cacheReplays.inc({ namespace });
    },
    onFailed({ namespace, durationMs }) {
      runs.inc({ namespace, outcome: RunOutcomeName.Failed });
      executionSeconds.observe({ namespace, outcome: RunOutcomeName.Failed }, durationMs / 1000);
    },
    onConflict({ namespace }) {
      runs.inc({ namespace, outcome: RunOutcomeName.InProgress });
    },
    onMismatch({ namespace }) {
      runs.inc({ namespace, outcome: RunOutcomeName.Mismatch });
    },
    onFailOpen({ namespace }) {
      runs.inc({ namespace, outcome: RunOutcomeName.FailOpen });
    },
    onTakeover({ namespace }) {
      takeovers.inc({ namespace });
    },
    onLeaseLost({ namespace }) {
      leasesLost.inc({ namespace });
    },
    onStoreError({ namespace, operation }) {
      storeErrors.inc({ namespace, operation });
    },
    onStepRecorded({ namespace }) {
      steps.inc({ namespace, result: StepResultName.Recorded });
    },
    onStepReplayed({ namespace }) {
      steps.inc({ namespace, result: StepResultName.Replayed });
    },
    onReplicationShort({ namespace, operation }) {
      replicationShort.inc({ namespace, operation });
    },
  };
}
