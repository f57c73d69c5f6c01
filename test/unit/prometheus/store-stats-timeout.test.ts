/**
 * A store whose `stats()` hangs (a pool waiting for a connection, a blackholed server) must cost its own
 * samples only: never the whole `/metrics` answer, and never once the store answers again.
 */
import { Counter, Registry } from 'prom-client';
import { describe, expect, it, vi } from 'vitest';
import { isInvalidOptionsError, memoryStore, type Store } from '../../../src/index.js';
import { registerStoreStats } from '../../../src/prometheus/index.js';

/** The scrape's text, or 'timed out' when it takes longer than a Prometheus scrape would wait. */
function scrapeWithin(registry: Registry, ms: number): Promise<string> {
  return Promise.race([
    registry.metrics(),
    new Promise<string>((resolve) => setTimeout(() => resolve('timed out'), ms)),
  ]);
}

describe('registerStoreStats with a store that does not answer', () => {
  it('answers the scrape without that store’s samples, and with them once it answers again', async () => {
    const registry = new Registry();
    new Counter({
      name: 'app_requests_total',
      help: 'the application’s own',
      registers: [registry],
    });
    const store = memoryStore();
    let hanging = true;
    const stats = vi.fn(() => (hanging ? new Promise<never>(() => {}) : store.stats()));
    const stuck: Store = { ...store, stats };
    registerStoreStats(store, { registry, label: 'healthy', maxAgeMs: 0 });
    registerStoreStats(stuck, { registry, label: 'stuck', maxAgeMs: 300, timeoutMs: 50 });

    const during = await scrapeWithin(registry, 2_000);
    expect(during).toContain('app_requests_total 0');
    expect(during).toContain('idempotency_store_records{store="healthy",status="completed"} 0');
    expect(during).not.toContain('store="stuck"');
    // Within maxAgeMs, a scrape waits for the call still running rather than piling another on the store.
    expect(await scrapeWithin(registry, 2_000)).not.toContain('store="stuck"');
    expect(stats).toHaveBeenCalledTimes(1);

    // The store answers again: once maxAgeMs has passed, its call that never settled is given up on.
    hanging = false;
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(await scrapeWithin(registry, 2_000)).toContain(
      'idempotency_store_records{store="stuck",status="completed"} 0',
    );
    expect(stats).toHaveBeenCalledTimes(2);
  });

  it('reports a store that throws instead of rejecting as unavailable, not the scrape as failed', async () => {
    const registry = new Registry();
    const store = memoryStore();
    const throwing: Store = {
      ...store,
      stats: () => {
        throw new Error('client is closed');
      },
    };
    registerStoreStats(throwing, { registry, maxAgeMs: 0 });
    expect(await registry.metrics()).not.toContain('store="memory"');
  });

  it('refuses a timeoutMs that is not a positive number of ms', () => {
    for (const timeoutMs of [0, -1, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 31]) {
      let error: unknown;
      try {
        registerStoreStats(memoryStore(), { registry: new Registry(), timeoutMs });
      } catch (caught) {
        error = caught;
      }
      expect(isInvalidOptionsError(error), String(timeoutMs)).toBe(true);
    }
  });
});
