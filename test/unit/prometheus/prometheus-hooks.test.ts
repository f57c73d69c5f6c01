import { Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { createIdempotency, isInvalidOptionsError, memoryStore } from '../../../src/index.js';
import { prometheusHooks } from '../../../src/prometheus/index.js';
import { unreachableClaimStore } from '../../helpers/broken-store.js';
import { ManualClock } from '../../helpers/clock.js';
import { crashAfterCharge, manualEngine } from '../../helpers/crashed-step.js';
import { replicationShortStore } from '../../helpers/replication-short-store.js';

/** Each series of `name` in the registry, as `{labels}` → value (histograms: their `_count`). */
async function series(registry: Registry, name: string): Promise<Record<string, number>> {
  const metric = registry.getSingleMetric(name);
  if (metric === undefined) return {};
  const { values } = await metric.get();
  const out: Record<string, number> = {};
  for (const { labels, value, metricName } of values as {
    labels: Record<string, string | number>;
    value: number;
    metricName?: string;
  }[]) {
    if (metricName !== undefined && metricName !== name && metricName !== `${name}_count`) continue;
    const { le: _le, ...rest } = labels;
    out[JSON.stringify(rest)] = value;
  }
  return out;
}

const runs = (namespace: string, outcome: string) => JSON.stringify({ namespace, outcome });

describe('prometheusHooks', () => {
  it('counts every way a run ends, and how long fn ran', async () => {
    const registry = new Registry();
    const clock = new ManualClock();
    const idempotency = createIdempotency({
      store: memoryStore({ clock }),
      clock,
      leaseMs: 1000,
      extendLease: false,
      hooks: prometheusHooks({ registry }),
    });
    // executed, then replayed twice (the second from the local cache)
    await idempotency.run({ key: 'a', payload: 1 }, () => {
      clock.advance(40);
      return 'ok';
    });
    await idempotency.run({ key: 'a', payload: 1 }, () => 'again');
    // mismatch
    await idempotency.run({ key: 'a', payload: 2 }, () => 'other');
    // failed (released)
    await expect(
      idempotency.run({ key: 'b' }, () => {
        throw new Error('declined');
      }),
    ).rejects.toThrow('declined');
    // in_progress, then a takeover once the holder's lease is over
    let release!: () => void;
    const held = idempotency.run(
      { key: 'c' },
      () =>
        new Promise<void>((resolve) => {
          release = resolve;
        }),
    );
    await new Promise((resolve) => setTimeout(resolve, 5));
    await expect(idempotency.run({ key: 'c' }, () => 'dup')).resolves.toMatchObject({
      status: 'in_progress',
    });
    clock.advance(1001);
    await expect(idempotency.run({ key: 'c' }, () => 'takeover')).resolves.toMatchObject({
      status: 'executed',
      attempt: 2,
    });
    // ...and the first holder's completion is fenced out: a lost lease
    release();
    await expect(held).rejects.toThrow();

    expect(await series(registry, 'idempotency_runs_total')).toEqual({
      [runs('default', 'executed')]: 2,
      [runs('default', 'replayed')]: 1,
      [runs('default', 'mismatch')]: 1,
      [runs('default', 'failed')]: 1,
      [runs('default', 'in_progress')]: 1,
    });
    expect(await series(registry, 'idempotency_cache_replays_total')).toEqual({
      [JSON.stringify({ namespace: 'default' })]: 1,
    });
    expect(await series(registry, 'idempotency_takeovers_total')).toEqual({
      [JSON.stringify({ namespace: 'default' })]: 1,
    });
    expect(await series(registry, 'idempotency_leases_lost_total')).toEqual({
      [JSON.stringify({ namespace: 'default' })]: 1,
    });
    expect(await series(registry, 'idempotency_execution_seconds')).toEqual({
      [runs('default', 'executed')]: 2,
      [runs('default', 'failed')]: 1,
    });
    const text = await registry.metrics();
    expect(text).toContain(
      'idempotency_execution_seconds_sum{namespace="default",outcome="executed"} 0.04',
    );
  });

  it('counts steps recorded, and steps a takeover replayed, without a step name label', async () => {
    const registry = new Registry();
    const engine = manualEngine(prometheusHooks({ registry }));
    // The first attempt records `charge` and dies; the takeover replays it and records `ship`.
    await crashAfterCharge(engine, 'k');
    await engine.idempotency.run({ key: 'k' }, async (ctx) => {
      await ctx.step('charge', () => 'ch_2');
      return ctx.step('ship', () => 'shipped');
    });
    const steps = (result: string) => JSON.stringify({ namespace: 'default', result });
    expect(await series(registry, 'idempotency_steps_total')).toEqual({
      [steps('recorded')]: 2,
      [steps('replayed')]: 1,
    });
  });

  it('counts store errors by operation, and runs that failed open', async () => {
    const registry = new Registry();
    const down = unreachableClaimStore();
    const idempotency = createIdempotency({ store: down, hooks: prometheusHooks({ registry }) });
    await expect(idempotency.run({ key: 'k' }, () => 1)).rejects.toThrow();
    await idempotency.run({ key: 'k', failOpen: true }, () => 1);
    expect(await series(registry, 'idempotency_store_errors_total')).toEqual({
      [JSON.stringify({ namespace: 'default', operation: 'claim' })]: 2,
    });
    expect(await series(registry, 'idempotency_runs_total')).toEqual({
      [runs('default', 'fail_open')]: 1,
    });
  });

  it('counts writes short of their replicas by operation, apart from store errors', async () => {
    // Arrange
    const registry = new Registry();
    const { store } = replicationShortStore();
    const idempotency = createIdempotency({ store, hooks: prometheusHooks({ registry }) });
    // Act: a step and a completion, then a release
    await idempotency.run({ key: 'a' }, (ctx) => ctx.step('charge', () => 1));
    await expect(
      idempotency.run({ key: 'b' }, () => {
        throw new Error('declined');
      }),
    ).rejects.toThrow('declined');
    // Assert
    const short = (operation: string) => JSON.stringify({ namespace: 'default', operation });
    expect(await series(registry, 'idempotency_replication_short_total')).toEqual({
      [short('saveStep')]: 1,
      [short('complete')]: 1,
      [short('release')]: 1,
    });
    expect(await series(registry, 'idempotency_store_errors_total')).toEqual({});
  });

  it('lets engines share one registry, their series told apart by namespace', async () => {
    const registry = new Registry();
    const store = memoryStore();
    const api = createIdempotency({
      store,
      namespace: 'api',
      hooks: prometheusHooks({ registry }),
    });
    const worker = createIdempotency({
      store,
      namespace: 'worker',
      hooks: prometheusHooks({ registry }),
    });
    await api.run({ key: 'k' }, () => 1);
    await worker.run({ key: 'k' }, () => 1);
    await worker.run({ key: 'k' }, () => 1);
    expect(await series(registry, 'idempotency_runs_total')).toEqual({
      [runs('api', 'executed')]: 1,
      [runs('worker', 'executed')]: 1,
      [runs('worker', 'replayed')]: 1,
    });
  });

  it('takes a prefix, and rejects a prefix or buckets Prometheus would not accept', async () => {
    const registry = new Registry();
    const hooks = prometheusHooks({ registry, prefix: 'shop_idem_' });
    await createIdempotency({ store: memoryStore(), hooks }).run({ key: 'k' }, () => 1);
    expect(await series(registry, 'shop_idem_runs_total')).toEqual({
      [runs('default', 'executed')]: 1,
    });
    for (const bad of [{ prefix: 'shop-idem' }, { buckets: [0.1, -1] }]) {
      let error: unknown;
      try {
        prometheusHooks({ registry, ...bad });
      } catch (caught) {
        error = caught;
      }
      expect(isInvalidOptionsError(error), JSON.stringify(bad)).toBe(true);
    }
  });

  it('refuses a registry whose metric of that name is of another kind', () => {
    const registry = new Registry();
    new Histogram({ name: 'idempotency_runs_total', help: 'not ours', registers: [registry] });
    expect(() => prometheusHooks({ registry })).toThrow(
      /"idempotency_runs_total" that is not a Counter/,
    );
  });
});
