/**
 * A deliberately broken store, to show that the conformance suite catches the bugs peers ship: a claim
 * that reads, yields, then writes (not atomic), a completion that ignores the fencing token, a claim
 * that lets any request take over a crashed one, and a listing of crashed claims that takes a live lease
 * for a crash.
 */
import { memoryStore, type Store } from '../../src/index.js';
import { checkListCrashedOptions, keyOrderedPage } from '../../src/store/crashed-paging.js';

/** Which bugs to put in. */
export interface BrokenStoreFaults {
  /** Claim with a read, an await, then a write: concurrent claims can all win. */
  nonAtomicClaim?: boolean;
  /** Complete whatever the token: a stale holder overwrites the newer attempt. */
  unfencedComplete?: boolean;
  /** Claim without the reservation: any request takes over a crashed claim once its lease ended. */
  unreservedClaim?: boolean;
  /** List every reserved in-progress claim as crashed, forgetting to check that its lease has ended. */
  listsLiveLeases?: boolean;
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
  if (faults.listsLiveLeases) {
    const claimed = new Set<string>();
    const claim = store.claim;
    store.claim = (key, options) => {
      claimed.add(key);
      return claim(key, options);
    };
    store.listCrashed = async (options) => {
      const { limit, after = '' } = checkListCrashedOptions(options, 'broken');
      const records = [];
      for (const key of [...claimed].filter((k) => k > after).sort()) {
        const inspection = await inner.inspect(key);
        const record = inspection?.record;
        // The bug: a reservation alone is taken for a crash, live lease or not.
        if (inspection !== undefined && record?.status === 'in_progress' && record.reservedUntil) {
          records.push({ key, record, now: inspection.now });
        }
      }
      return keyOrderedPage(records.slice(0, limit + 1), limit);
    };
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
