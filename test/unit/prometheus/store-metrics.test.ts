import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import {
  createIdempotency,
  isInvalidOptionsError,
  memoryStore,
  ReplicationShortError,
  type Store,
} from '../../../src/index.js';
import { withStoreMetrics } from '../../../src/prometheus/index.js';
import { PartialBatchError } from '../../../src/store/partial-batch.js';
import { unreachableClaimStore } from '../../helpers/broken-store.js';
import { replicationShortStore } from '../../helpers/replication-short-store.js';

/** `name`'s sample for exactly these labels (histograms: pass `name_count`, `name_sum`…). */
async function sample(registry: Registry, name: string, labels: string): Promise<number> {
  const text = await registry.metrics();
  const line = text.split('\n').find((l) => l.startsWith(`${name}{${labels}} `));
  return line === undefined ? 0 : Number(line.split(' ')[1]);
}

/** The process warnings emitted while it listens, by code and message. */
function collectWarnings() {
  const seen: Array<{ code: string | undefined; message: string }> = [];
  const listener = (warning: Error & { code?: string }) => {
    seen.push({ code: warning.code, message: warning.message });
  };
  process.on('warning', listener);
  return {
    codes: () => seen.map(({ code }) => code),
    messages: () => seen.map(({ message }) => message),
    stop: () => process.off('warning', listener),
  };
}

describe('withStoreMetrics', () => {
  it('times every call by operation, and counts the items of each batch', async () => {
    const registry = new Registry();
    const store = withStoreMetrics(memoryStore(), { registry });
    const idempotency = createIdempotency({ store, extendLease: false, cache: false });
    // Eight runs started in one tick: their claims go as one claimMany, their completions as one batch.
    await Promise.all(
      Array.from({ length: 8 }, (_, i) => idempotency.run({ key: `k${i}` }, () => i)),
    );
    await idempotency.run({ key: 'k0' }, () => 'replayed');

    const count = (operation: string) =>
      sample(
        registry,
        'idempotency_store_call_seconds_count',
        `store="memory",operation="${operation}",result="ok"`,
      );
    expect(await count('claimMany')).toBe(1);
    expect(await count('claim')).toBe(1); // the lone replay
    expect(
      (await count('completeMany')) +
        (await count('completeAndClaimMany')) +
        (await count('complete')),
    ).toBeGreaterThanOrEqual(1);
    expect(
      await sample(
        registry,
        'idempotency_store_batch_items_sum',
        'store="memory",operation="claimMany"',
      ),
    ).toBe(8);
  });

  it('times failed calls as errors and passes the error through unchanged', async () => {
    const registry = new Registry();
    const down = unreachableClaimStore();
    const store = withStoreMetrics(down, { registry, label: 'primary' });
    await expect(store.claim('k', { fingerprint: '', leaseMs: 1000 })).rejects.toThrow(
      'connection refused',
    );
    // A store that throws instead of rejecting still gives the caller a rejection.
    const throwing: Store = {
      ...memoryStore(),
      get: () => {
        throw new Error('bug in a store');
      },
    };
    await expect(withStoreMetrics(throwing, { registry }).get('k')).rejects.toThrow(
      'bug in a store',
    );
    expect(
      await sample(
        registry,
        'idempotency_store_call_seconds_count',
        'store="primary",operation="claim",result="error"',
      ),
    ).toBe(1);
    expect(
      await sample(
        registry,
        'idempotency_store_call_seconds_count',
        'store="memory",operation="get",result="error"',
      ),
    ).toBe(1);
  });

  it('times a write applied but short of its replicas as unconfirmed, not as an error', async () => {
    // Arrange: a store answering as the Redis store with waitForReplicas does while its replica is down.
    const registry = new Registry();
    const { store: short } = replicationShortStore();
    const store = withStoreMetrics(short, { registry, label: 'primary' });
    const claim = await store.claim('k', { fingerprint: '', leaseMs: 60_000 });
    if (!claim.claimed) throw new Error('expected a claim');
    const batchOf = (results: unknown[]): Store => ({
      ...memoryStore(),
      completeMany: () => Promise.reject(new PartialBatchError(results)),
    });
    const shortError = new ReplicationShortError(
      { operation: 'complete', result: true, acknowledged: 0, required: 1 },
      'complete was applied but acknowledged by 0 of 1 replica(s)',
    );
    // Act
    await expect(
      store.complete('k', claim.token, Buffer.from('"ok"'), 60_000),
    ).rejects.toMatchObject({ code: 'replication_short', result: true });
    await withStoreMetrics(batchOf([true, shortError]), { registry, label: 'batch' })
      .completeMany?.([])
      .catch(() => undefined);
    await withStoreMetrics(batchOf([new Error('down'), shortError]), { registry, label: 'mixed' })
      .completeMany?.([])
      .catch(() => undefined);
    // Assert: the applied writes are not store errors; a batch with an item that failed still is.
    const count = (labels: string) =>
      sample(registry, 'idempotency_store_call_seconds_count', labels);
    expect(await count('store="primary",operation="complete",result="unconfirmed"')).toBe(1);
    expect(await count('store="primary",operation="complete",result="error"')).toBe(0);
    expect(await count('store="batch",operation="completeMany",result="unconfirmed"')).toBe(1);
    expect(await count('store="mixed",operation="completeMany",result="error"')).toBe(1);
  });

  it('keeps the capabilities, and offers only the optional methods the store has', () => {
    const inner = memoryStore();
    const { claimMany: _a, completeMany: _b, completeAndClaimMany: _c, ...plain } = inner;
    const bare: Store = { ...plain, capabilities: { ...inner.capabilities, batch: false } };
    const wrapped = withStoreMetrics(bare, { registry: new Registry() });
    expect(wrapped.capabilities).toBe(bare.capabilities);
    expect(wrapped.claimMany).toBeUndefined();
    expect(wrapped.completeAndClaimMany).toBeUndefined();
    expect(typeof withStoreMetrics(inner, { registry: new Registry() }).completeAndClaimMany).toBe(
      'function',
    );
  });

  it('warns once when a second store is timed under a label another store holds, naming the label option', async () => {
    // Arrange: two stores of one kind share the default label, their `name`.
    const registry = new Registry();
    const warnings = collectWarnings();
    const orders = withStoreMetrics(memoryStore(), { registry });
    // Act
    withStoreMetrics(memoryStore(), { registry });
    withStoreMetrics(memoryStore(), { registry });
    await new Promise((resolve) => setImmediate(resolve));
    // Assert: said once, rather than both stores' calls adding up under store="memory" in silence.
    expect(warnings.codes()).toEqual(['IDEMPOTENCY_KIT_SHARED_STORE_LABEL']);
    expect(warnings.messages()[0]).toMatch(/'memory'.*distinct `label` option/);
    // Under distinct labels, each store's calls are its own.
    const payments = withStoreMetrics(memoryStore(), { registry, label: 'payments' });
    await orders.get('k');
    await payments.get('k');
    await payments.get('k');
    const gets = (store: string) =>
      sample(
        registry,
        'idempotency_store_call_seconds_count',
        `store="${store}",operation="get",result="ok"`,
      );
    expect([await gets('payments')]).toEqual([2]);
    // Another registry is another set of series: the label is free there.
    withStoreMetrics(memoryStore(), { registry: new Registry() });
    await new Promise((resolve) => setImmediate(resolve));
    expect(warnings.codes()).toHaveLength(1);
    warnings.stop();
  });

  it('says nothing when the same store is wrapped again, and frees its label once closed through the wrapper', async () => {
    // Arrange
    const registry = new Registry();
    const warnings = collectWarnings();
    let closed = false;
    const store: Store = {
      ...memoryStore(),
      close: async () => {
        closed = true;
      },
    };
    const first = withStoreMetrics(store, { registry, label: 'orders' });
    // Act / Assert: the same store object again is its own calls, not another store's.
    const again = withStoreMetrics(store, { registry, label: 'orders' });
    await first.get('k');
    await again.get('k');
    expect(
      await sample(
        registry,
        'idempotency_store_call_seconds_count',
        'store="orders",operation="get",result="ok"',
      ),
    ).toBe(2);
    // A closed store's replacement (a failover to a new client) takes its label.
    await first.close?.();
    expect(closed).toBe(true);
    withStoreMetrics(memoryStore(), { registry, label: 'orders' });
    await new Promise((resolve) => setImmediate(resolve));
    expect(warnings.codes()).toEqual([]);
    warnings.stop();
  });

  it('refuses a label, prefix or buckets Prometheus would not accept', () => {
    for (const bad of [{ label: '' }, { prefix: 'store-metrics' }, { buckets: [0.001, 0] }]) {
      let error: unknown;
      try {
        withStoreMetrics(memoryStore(), { registry: new Registry(), ...bad });
      } catch (caught) {
        error = caught;
      }
      expect(isInvalidOptionsError(error), JSON.stringify(bad)).toBe(true);
    }
  });
});
