/**
 * A deliberately broken store, to show that the conformance suite catches the bugs peers ship: a claim
 * that reads, yields, then writes (not atomic), a completion that ignores the fencing token, and a claim
 * that lets any request take over a crashed one.
 */
import { memoryStore, type Store } from '../../src/index.js';

/** Which bugs to put in. */
export interface BrokenStoreFaults {
  /** Claim with a read, an await, then a write: concurrent claims can all win. */
  nonAtomicClaim?: boolean;
  /** Complete whatever the token: a stale holder overwrites the newer attempt. */
  unfencedComplete?: boolean;
  /** Claim without the reservation: any request takes over a crashed claim once its lease ended. */
  unreservedClaim?: boolean;
}

/** A memory store with the given faults. */
export function brokenStore(faults: BrokenStoreFaults): Store {
  const inner = memoryStore();
  const store: Store = { ...inner, name: 'broken' };
  if (faults.nonAtomicClaim) {
    store.claim = async (key, options) => {
      const existing = await inner.get(key);
      await new Promise((resolve) => setImmediate(resolve));
      if (existing !== undefined) return { claimed: false, record: existing };
      await inner.delete(key);
      return inner.claim(key, options);
    };
  }
  if (faults.unreservedClaim) {
    store.claim = (key, { fingerprint, leaseMs }) => inner.claim(key, { fingerprint, leaseMs });
  }
  if (faults.unfencedComplete) {
    store.complete = async (key, _token, outcome, retentionMs) => {
      const record = await inner.get(key);
      if (record?.status !== 'in_progress') return false;
      return inner.complete(key, record.token, outcome, retentionMs);
    };
  }
  return store;
}

/**
 * A memory store whose every claim fails as an unreachable server's would (batching off, so each run
 * makes its own claim): for fail-closed and fail-open runs and the hooks that report them.
 */
export function unreachableClaimStore(): Store {
  const inner = memoryStore();
  return {
    ...inner,
    capabilities: { ...inner.capabilities, batch: false },
    claimMany: undefined,
    completeMany: undefined,
    claim: () => Promise.reject(new Error('connection refused')),
  };
}
