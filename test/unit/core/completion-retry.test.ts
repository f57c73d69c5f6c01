/**
 * A completion that fails is retried for as long as the lease lasts: the handler's effect already
 * happened, and a completion given up on leaves the key to be taken over after the lease, by a retry that
 * runs the handler again. So a store outage shorter than what is left of the lease costs a wait, never a
 * second execution; a longer one still fails the run once the lease is over.
 */
import { describe, expect, it, vi } from 'vitest';
import {
  createIdempotency,
  isStoreUnavailableError,
  memoryStore,
  type Store,
} from '../../../src/index.js';

/** A memory store whose completions fail until `down()` says the outage is over. */
function storeDownWhile(down: () => boolean): { store: Store; inner: Store } {
  const inner = memoryStore();
  const store: Store = {
    ...inner,
    capabilities: { ...inner.capabilities, batch: false },
    complete: async (...args) => {
      if (down()) throw new Error('connection refused');
      return inner.complete(...args);
    },
  };
  return { store, inner };
}

describe('a failed completion', () => {
  it('is retried through an outage shorter than the lease: executed once, and stored', async () => {
    // Arrange: completions fail for 600 ms (more than three quick attempts used to cover).
    const until = performance.now() + 600;
    const { store, inner } = storeDownWhile(() => performance.now() < until);
    const onStoreError = vi.fn();
    const idempotency = createIdempotency({
      store,
      batch: false,
      leaseMs: 5_000,
      hooks: { onStoreError },
    });
    const fn = vi.fn(() => 'charged');
    // Act
    const outcome = await idempotency.run({ key: 'payment-1' }, fn);
    const retry = await idempotency.run({ key: 'payment-1' }, fn);
    // Assert
    expect(outcome).toMatchObject({ status: 'executed', value: 'charged' });
    expect(retry).toMatchObject({ status: 'replayed', value: 'charged' });
    expect(fn).toHaveBeenCalledTimes(1);
    expect(onStoreError.mock.calls.length).toBeGreaterThan(3);
    expect(await inner.get(idempotency.storageKeyFor('payment-1'))).toMatchObject({
      status: 'completed',
    });
  });

  it('gives up once the lease is over, with StoreUnavailableError', async () => {
    // Arrange: the store never comes back.
    const { store } = storeDownWhile(() => true);
    const idempotency = createIdempotency({ store, batch: false, leaseMs: 400 });
    const started = performance.now();
    // Act
    const outcome = idempotency.run({ key: 'payment-2' }, () => 'charged');
    // Assert: not before the lease is (nearly) over, and not long after it.
    await expect(outcome).rejects.toSatisfy(isStoreUnavailableError);
    const elapsed = performance.now() - started;
    expect(elapsed).toBeGreaterThanOrEqual(250);
    expect(elapsed).toBeLessThan(5_000);
  });
});

describe('a completion whose store client was closed (a shutdown)', () => {
  it.each([
    ['node-redis', Object.assign(new Error('The client is closed'), { name: 'ClientClosedError' })],
    ['ioredis', new Error('Connection is closed.')],
    ['pg Pool', new Error('Cannot use a pool after calling end on the pool')],
    ['better-sqlite3', new Error('The database connection is not open')],
  ])('is not retried for the rest of the lease: %s', async (_client, closed) => {
    // Arrange: the client's error wrapped as a store wraps it.
    const inner = memoryStore();
    const store: Store = {
      ...inner,
      capabilities: { ...inner.capabilities, batch: false },
      complete: async () => {
        throw new Error('store failed during complete', { cause: closed });
      },
    };
    const onStoreError = vi.fn();
    const idempotency = createIdempotency({
      store,
      batch: false,
      leaseMs: 30_000,
      hooks: { onStoreError },
    });
    const started = performance.now();
    // Act
    const outcome = idempotency.run({ key: 'payment-3' }, () => 'charged');
    // Assert: the three quick attempts, then the error; not 30 s of retries.
    await expect(outcome).rejects.toSatisfy(isStoreUnavailableError);
    expect(onStoreError).toHaveBeenCalledTimes(3);
    expect(performance.now() - started).toBeLessThan(5_000);
  });
});
