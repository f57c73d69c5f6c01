import { Registry } from 'prom-client';
import { describe, expect, it, vi } from 'vitest';
import { isInvalidOptionsError, memoryStore, type Store } from '../../../src/index.js';
import { registerStoreStats } from '../../../src/prometheus/index.js';
import { ManualClock } from '../../helpers/clock.js';

/** Every sample of the store gauges in one scrape, as `series` → value. */
async function scrape(registry: Registry): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const line of (await registry.metrics()).split('\n')) {
    if (line.startsWith('#') || line === '') continue;
    const at = line.lastIndexOf(' ');
    out[line.slice(0, at)] = Number(line.slice(at + 1));
  }
  return out;
}

describe('registerStoreStats', () => {
  it('reports records by status and the oldest lease age at scrape time', async () => {
    const clock = new ManualClock();
    const store = memoryStore({ clock });
    const registry = new Registry();
    const stats = vi.spyOn(store, 'stats');
    registerStoreStats(store, { registry, maxAgeMs: 0 });
    await store.claim('a', { fingerprint: '', leaseMs: 10_000 });
    await store.claim('b', { fingerprint: '', leaseMs: 100 });
    const c = await store.claim('c', { fingerprint: '', leaseMs: 10_000 });
    if (!c.claimed) throw new Error('c was not claimed');
    await store.complete('c', c.token, new Uint8Array([1]), 60_000);
    clock.advance(2500);

    expect(await scrape(registry)).toEqual({
      'idempotency_store_records{store="memory",status="in_progress"}': 1,
      'idempotency_store_records{store="memory",status="completed"}': 1,
      'idempotency_store_records{store="memory",status="stale_lease"}': 1,
      'idempotency_store_oldest_lease_age_seconds{store="memory"}': 2.5,
    });
    // Both gauges of one scrape share one reading, even with no reuse across scrapes.
    expect(stats).toHaveBeenCalledTimes(1);
  });

  it('reads the store once per maxAgeMs, once for both gauges, and several stores under their labels', async () => {
    const registry = new Registry();
    const primary = memoryStore();
    const stats = vi.spyOn(primary, 'stats');
    registerStoreStats(primary, { registry, label: 'primary' });
    registerStoreStats(memoryStore(), { registry, label: 'secondary' });
    await scrape(registry);
    const second = await scrape(registry);
    expect(stats).toHaveBeenCalledTimes(1);
    expect(second['idempotency_store_records{store="secondary",status="completed"}']).toBe(0);
    expect(() => registerStoreStats(memoryStore(), { registry, label: 'primary' })).toThrow(
      /labelled 'primary'/,
    );
  });

  it('stops reading a store once its registration is removed, and takes its label again', async () => {
    // Arrange
    const registry = new Registry();
    const closing = memoryStore();
    const stats = vi.spyOn(closing, 'stats');
    const unregister = registerStoreStats(closing, { registry, label: 'orders', maxAgeMs: 0 });
    await scrape(registry);
    // Act: the store is about to be closed.
    unregister();
    const after = await scrape(registry);
    // Assert: not read again, no sample, and the label is free for its replacement.
    expect(stats).toHaveBeenCalledTimes(1);
    expect(Object.keys(after).filter((series) => series.includes('orders'))).toEqual([]);
    const replacement = registerStoreStats(memoryStore(), { registry, label: 'orders' });
    unregister(); // a second call, after the label was taken again, leaves the replacement alone
    expect(Object.keys(await scrape(registry)).some((s) => s.includes('store="orders"'))).toBe(
      true,
    );
    replacement();
  });

  it('reports nothing for a store that cannot answer, rather than an old reading', async () => {
    const registry = new Registry();
    const store = memoryStore();
    const flaky: Store = { ...store, stats: vi.fn(store.stats) };
    registerStoreStats(flaky, { registry, maxAgeMs: 0 });
    expect(Object.keys(await scrape(registry))).toHaveLength(4);
    vi.mocked(flaky.stats).mockRejectedValueOnce(new Error('connection refused'));
    expect(await scrape(registry)).toEqual({});
  });

  it('refuses a bad label or maxAgeMs', () => {
    for (const bad of [{ label: '' }, { maxAgeMs: -1 }]) {
      let error: unknown;
      try {
        registerStoreStats(memoryStore(), { registry: new Registry(), ...bad });
      } catch (caught) {
        error = caught;
      }
      expect(isInvalidOptionsError(error), JSON.stringify(bad)).toBe(true);
    }
  });
});
