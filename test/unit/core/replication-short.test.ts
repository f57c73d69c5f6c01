/**
 * A write made after the handler ran (a completion, a stored error, a release, a step's result) that the
 * store applied but could not confirm on its replicas (`ReplicationShortError`) is taken as its answer
 * and reported through `onReplicationShort`: the run answers as it would have, the write is not sent
 * again, and nothing is counted as a store error.
 */
import { describe, expect, it, vi } from 'vitest';
import { createIdempotency, type ReplicationShortHookEvent } from '../../../src/index.js';
import { replicationShortStore } from '../../helpers/replication-short-store.js';

function engine() {
  const { store, inner, calls } = replicationShortStore();
  const shorts: ReplicationShortHookEvent[] = [];
  const onStoreError = vi.fn();
  const onStepRecorded = vi.fn();
  const idempotency = createIdempotency({
    store,
    namespace: 'payments',
    batch: false,
    cache: false,
    hooks: { onReplicationShort: (event) => shorts.push(event), onStoreError, onStepRecorded },
  });
  return { idempotency, inner, calls, shorts, onStoreError, onStepRecorded };
}

describe('a write applied but short of its replicas', () => {
  it('completes the run once, reports the completion with the key, namespace and count, and replays it', async () => {
    // Arrange
    const { idempotency, inner, calls, shorts, onStoreError } = engine();
    const fn = vi.fn(() => 'charged');
    // Act
    const outcome = await idempotency.run({ key: 'pay-1' }, fn);
    const retry = await idempotency.run({ key: 'pay-1' }, fn);
    // Assert
    expect(outcome).toMatchObject({ status: 'executed', value: 'charged' });
    expect(retry).toEqual({ status: 'replayed', value: 'charged' });
    expect(fn).toHaveBeenCalledTimes(1);
    expect(calls).toEqual(['complete']);
    expect(shorts).toEqual([
      {
        namespace: 'payments',
        storageKey: idempotency.storageKeyFor('pay-1'),
        token: outcome.status === 'executed' ? outcome.token : -1,
        operation: 'complete',
        acknowledged: 0,
        required: 1,
      },
    ]);
    expect(onStoreError).not.toHaveBeenCalled();
    expect(await inner.get(idempotency.storageKeyFor('pay-1'))).toMatchObject({
      status: 'completed',
    });
  });

  it("reports a release after the handler threw, and rejects with the handler's error", async () => {
    // Arrange
    const { idempotency, inner, shorts, onStoreError } = engine();
    // Act
    const outcome = idempotency.run({ key: 'pay-2' }, () => {
      throw new Error('declined');
    });
    // Assert
    await expect(outcome).rejects.toThrow('declined');
    expect(shorts.map(({ operation }) => operation)).toEqual(['release']);
    expect(onStoreError).not.toHaveBeenCalled();
    expect(await inner.get(idempotency.storageKeyFor('pay-2'))).toBeUndefined();
  });

  it('reports an error stored as the outcome (storeErrors) as a completion', async () => {
    // Arrange
    const { idempotency, shorts, onStoreError } = engine();
    // Act
    const outcome = idempotency.run({ key: 'pay-3', storeErrors: true }, () => {
      throw new Error('insufficient funds');
    });
    // Assert
    await expect(outcome).rejects.toThrow('insufficient funds');
    expect(shorts.map(({ operation }) => operation)).toEqual(['complete']);
    expect(onStoreError).not.toHaveBeenCalled();
  });

  it("goes on after a step's result short of its replicas: recorded, reported, and the run completes", async () => {
    // Arrange
    const { idempotency, shorts, onStoreError, onStepRecorded } = engine();
    // Act
    const outcome = await idempotency.run({ key: 'pay-4' }, async (ctx) => {
      const charge = await ctx.step('charge', () => 'ch_1');
      return `${charge}:done`;
    });
    // Assert
    expect(outcome).toMatchObject({ status: 'executed', value: 'ch_1:done' });
    expect(shorts.map(({ operation }) => operation)).toEqual(['saveStep', 'complete']);
    expect(onStepRecorded).toHaveBeenCalledTimes(1);
    expect(onStoreError).not.toHaveBeenCalled();
  });
});
