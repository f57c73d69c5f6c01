/**
 * Two copies of the package in one process (two versions installed side by side, a module graph a dev
 * server evaluated again) that register stores on one registry: each store's gauges are reported,
 * whichever copy created the gauges, and the labels of both copies are one set.
 */
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { memoryStore } from '../../../src/index.js';
import { registerStoreStats } from '../../../src/prometheus/index.js';

describe('registerStoreStats from two copies of the package', () => {
  it('reports the stores of both on the registry they share', async () => {
    // A second evaluation of the module: state of its own, the same prom-client.
    const other = (await import(
      // @ts-expect-error: a query string makes it another module instance, which TypeScript cannot see
      '../../../src/prometheus/store-stats.js?copy=2'
    )) as typeof import('../../../src/prometheus/store-stats.js');
    expect(other.registerStoreStats).not.toBe(registerStoreStats);
    const registry = new Registry();
    registerStoreStats(memoryStore(), { registry, label: 'first' });
    other.registerStoreStats(memoryStore(), { registry, label: 'second' });

    const text = await registry.metrics();
    expect(text).toContain('idempotency_store_records{store="first",status="completed"} 0');
    expect(text).toContain('idempotency_store_records{store="second",status="completed"} 0');
    expect(() => other.registerStoreStats(memoryStore(), { registry, label: 'first' })).toThrow(
      /labelled 'first'/,
    );
  });
});
