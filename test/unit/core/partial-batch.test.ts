import { describe, expect, it, vi } from 'vitest';
import {
  createIdempotency,
  memoryStore,
  ReplicationShortError,
  type Store,
} from '../../../src/index.js';
import { withBatching } from '../../../src/store/batching.js';
import { PartialBatchError } from '../../../src/store/partial-batch.js';

/** What the Redis store puts in place of a completion it applied but its replicas did not confirm. */
function shortOf(operation = 'complete'): ReplicationShortError {
  return new ReplicationShortError(
    { operation, result: true, acknowledged: 0, required: 1 },
    `Redis store: ${operation} was applied on the primary but 0 of 1 replica(s) confirmed it`,
  );
}

describe('PartialBatchError', () => {
  it('counts the items that could not be applied', () => {
    // Arrange / Act
    const error = new PartialBatchError([
      true,
      new Error('WRONGTYPE'),
      false,
      new Error('WRONGTYPE'),
    ]);
    // Assert
    expect(error.message).toBe('2 item(s) of the batch could not be applied');
    expect([error.failed, error.unconfirmed]).toEqual([2, 0]);
  });

  it('does not call an applied item short of its replicas one that could not be applied', () => {
    // Arrange: completeMany on a Redis store with waitForReplicas, whose WAIT fell short: both applied
    // completions are errors in the results, the fenced-out one is `false`.
    const results = [shortOf(), false, shortOf()];
    // Act
    const error = new PartialBatchError(results);
    // Assert
    expect(error.message).toBe(
      '2 item(s) of the batch were applied but not confirmed by enough replicas (waitForReplicas); none failed',
    );
    expect(error.message).not.toMatch(/could not be applied/);
    expect([error.failed, error.unconfirmed]).toEqual([0, 2]);
  });

  it('tells both apart in one batch, completions and claims alike', () => {
    // Arrange: completeAndClaimMany: an applied completion short of replicas, a claim that failed.
    const results = { completed: [shortOf(), true], claimed: [new Error('WRONGTYPE')] };
    // Act
    const error = new PartialBatchError(results);
    // Assert
    expect(error.message).toBe(
      '1 item(s) of the batch could not be applied; 1 other(s) were applied but not confirmed by enough replicas (waitForReplicas)',
    );
    expect([error.failed, error.unconfirmed]).toEqual([1, 1]);
  });
});

describe('the batcher, given a batch with items short of their replicas', () => {
  /**
   * A memory store whose completeMany applies all but the key `bad` names, and reports the one `short`
   * names as applied short of its replicas (the Redis store's answer under `waitForReplicas`).
   */
  function shortReplicasStore(
    keys: { short: string; bad: string } = { short: 'short', bad: 'bad' },
  ): { store: Store; completeMany: ReturnType<typeof vi.fn> } {
    const inner = memoryStore();
    const itemError = new Error('WRONGTYPE');
    const completeMany = vi.fn(
      async (requests: Parameters<NonNullable<Store['completeMany']>>[0]) => {
        const applied = await inner.completeMany!(requests.filter((r) => r.key !== keys.bad));
        const items = requests.map((r) => {
          if (r.key === keys.bad) return itemError;
          const result = applied.shift();
          return r.key === keys.short && result === true ? shortOf() : result;
        });
        throw new PartialBatchError(items);
      },
    );
    return { store: { ...inner, completeMany }, completeMany };
  }

  it('gives each caller its own answer: the unconfirmed one its ReplicationShortError, the failed one its error', async () => {
    // Arrange
    const { store, completeMany } = shortReplicasStore();
    const tokens = new Map<string, number>();
    for (const key of ['ok', 'short', 'bad']) {
      const claim = await store.claim(key, { fingerprint: '', leaseMs: 60_000 });
      if (!claim.claimed) throw new Error('not claimed');
      tokens.set(key, claim.token);
    }
    const batched = withBatching(store);
    // Act: three completions in one tick, so one completeMany.
    const [ok, short, bad] = await Promise.allSettled(
      ['ok', 'short', 'bad'].map((key) =>
        batched.complete(key, tokens.get(key)!, Uint8Array.of(1, 0, 0x75), 60_000),
      ),
    );
    // Assert
    expect(completeMany).toHaveBeenCalledOnce();
    expect(ok).toEqual({ status: 'fulfilled', value: true });
    expect(short).toMatchObject({ status: 'rejected', reason: expect.any(ReplicationShortError) });
    expect(bad).toMatchObject({ status: 'rejected', reason: { message: 'WRONGTYPE' } });
  });

  it('through the engine, answers the unconfirmed run as executed and reports it', async () => {
    // Arrange: the store sees storage keys, which the engine derives as it does for its runs.
    const keyOf = createIdempotency({ store: memoryStore() }).storageKeyFor;
    const { store, completeMany } = shortReplicasStore({
      short: keyOf('short'),
      bad: keyOf('bad'),
    });
    const onReplicationShort = vi.fn();
    const onStoreError = vi.fn();
    const idempotency = createIdempotency({
      store,
      batch: {},
      leaseMs: 1_000,
      hooks: { onReplicationShort, onStoreError },
    });
    // Act: started together, their claims and then their completions go as one batch each.
    const [ok, short] = await Promise.allSettled(
      ['ok', 'short', 'bad'].map((key) => idempotency.run({ key }, () => key)),
    );
    // Assert: the applied completion is an answer, not a failure; only 'bad' is a store error.
    expect(completeMany).toHaveBeenCalled();
    expect(completeMany.mock.calls[0]?.[0]).toHaveLength(3);
    expect(ok).toMatchObject({ status: 'fulfilled', value: { status: 'executed' } });
    expect(short).toMatchObject({ status: 'fulfilled', value: { status: 'executed' } });
    expect(onReplicationShort).toHaveBeenCalledOnce();
    expect(onReplicationShort.mock.calls[0]?.[0]).toMatchObject({
      storageKey: keyOf('short'),
      operation: 'complete',
      required: 1,
    });
    expect(onStoreError.mock.calls.every(([event]) => event.storageKey === keyOf('bad'))).toBe(
      true,
    );
    await expect(store.get(keyOf('short'))).resolves.toMatchObject({ status: 'completed' });
  });
});
