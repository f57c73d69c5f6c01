/**
 * A memory store that behaves as the Redis store with `waitForReplicas` does while its replicas are
 * down: each completion, release and step result is applied, then answered with `ReplicationShortError`
 * (carrying the answer) instead of the answer itself, so that the engine's handling of it can be tested
 * without servers.
 */
import { memoryStore, ReplicationShortError, type Store } from '../../src/index.js';

/** The store, the memory store behind it (to read what was applied), and the calls it answered short. */
export function replicationShortStore(): { store: Store; inner: Store; calls: string[] } {
  const inner = memoryStore();
  const calls: string[] = [];
  const short = async (operation: string, applied: Promise<boolean>): Promise<boolean> => {
    const result = await applied;
    calls.push(operation);
    if (!result) return result;
    throw new ReplicationShortError(
      { operation, result, acknowledged: 0, required: 1 },
      `${operation} was applied but acknowledged by 0 of 1 replica(s)`,
    );
  };
  const store: Store = {
    ...inner,
    // Single calls: the batch paths are covered against a real primary and replica.
    capabilities: { ...inner.capabilities, batch: false },
    complete: (key, token, outcome, retentionMs) =>
      short('complete', inner.complete(key, token, outcome, retentionMs)),
    release: (key, token) => short('release', inner.release(key, token)),
    saveStep: (key, token, name, value) =>
      short(
        'saveStep',
        (inner.saveStep as NonNullable<Store['saveStep']>)(key, token, name, value),
      ),
  };
  return { store, inner, calls };
}
