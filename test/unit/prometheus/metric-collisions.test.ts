/**
 * A registry that already holds a metric of one of our names but with other labels (the application's
 * own, or one registered by another version of this package): refused when the hooks or wrapper are
 * built, never found out as updates that throw. Through `withStoreMetrics` those made every store call
 * fail, so every run ended in `StoreUnavailableError`.
 */
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { createIdempotency, isInvalidOptionsError, memoryStore } from '../../../src/index.js';
import {
  prometheusConsumerHooks,
  prometheusHooks,
  registerStoreStats,
  withStoreMetrics,
} from '../../../src/prometheus/index.js';

/** What `build` throws, or undefined. */
function thrownBy(build: () => unknown): unknown {
  try {
    build();
  } catch (error) {
    return error;
  }
  return undefined;
}

describe('a registry holding one of the metric names with other labels', () => {
  it('is refused by withStoreMetrics, instead of failing every store call', async () => {
    const registry = new Registry();
    new Histogram({
      name: 'idempotency_store_call_seconds',
      help: 'registered by another version',
      labelNames: ['operation'],
      registers: [registry],
    });
    const error = thrownBy(() => withStoreMetrics(memoryStore(), { registry }));
    expect(isInvalidOptionsError(error), String(error)).toBe(true);
    expect(String(error)).toMatch(/idempotency_store_call_seconds.*labels \[operation\]/);

    // Under another prefix, the wrapper changes nothing: runs go through.
    const store = withStoreMetrics(memoryStore(), { registry, prefix: 'payments_idempotency_' });
    const engine = createIdempotency({ store });
    expect(await engine.run({ key: 'k' }, async () => 'ok')).toMatchObject({ status: 'executed' });
  });

  it('is refused by the hooks and the store gauges too', () => {
    const registry = new Registry();
    new Counter({
      name: 'idempotency_runs_total',
      help: 'x',
      labelNames: ['route'],
      registers: [registry],
    });
    new Counter({
      name: 'idempotency_consumer_messages_total',
      help: 'x',
      labelNames: ['queue'],
      registers: [registry],
    });
    new Gauge({ name: 'idempotency_store_records', help: 'x', registers: [registry] });
    for (const build of [
      () => prometheusHooks({ registry }),
      () => prometheusConsumerHooks({ registry }),
      () => registerStoreStats(memoryStore(), { registry }),
    ]) {
      expect(isInvalidOptionsError(thrownBy(build))).toBe(true);
    }
  });

  it('is shared when its labels are the same, in any order', () => {
    const registry = new Registry();
    const runs = new Counter({
      name: 'idempotency_runs_total',
      help: 'x',
      labelNames: ['outcome', 'namespace'],
      registers: [registry],
    });
    expect(prometheusHooks({ registry }).metrics.runs).toBe(runs);
    expect(prometheusHooks({ registry }).metrics.runs).toBe(runs);
  });
});

describe('a registry holding one of the histograms with other buckets', () => {
  it('is refused, instead of observing silently into the first caller’s buckets', () => {
    const registry = new Registry();
    prometheusHooks({ registry, buckets: [0.1, 1, 10] });
    const error = thrownBy(() => prometheusHooks({ registry, buckets: [0.5, 5] }));
    expect(isInvalidOptionsError(error), String(error)).toBe(true);
    expect(String(error)).toMatch(/buckets \[0\.1, 1, 10\], not \[0\.5, 5\]/);
    // The same buckets are shared, as before.
    expect(() => prometheusHooks({ registry, buckets: [0.1, 1, 10] })).not.toThrow();
    expect(() => prometheusHooks({ registry: new Registry() })).not.toThrow();
  });
});
