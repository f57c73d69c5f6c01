/**
 * What a losing claim answers: the suite must fail a store that answers it with a record read before the
 * claim was decided (a cache, a `SELECT` ahead of the atomic write), which every winner-counting check
 * passes, since the winner is still the only one.
 */
import { describe, expect, it } from 'vitest';
import {
  type ClaimResult,
  type IdempotencyRecord,
  memoryStore,
  type Store,
} from '../../../src/index.js';
import { storeConformanceChecks } from '../../../src/testing/index.js';

const CHECK = 'answers a losing claim with the record as it stands';

/** A store that answers a losing claim with the record it answered the key's last losing claim with. */
function cachedLoserStore(): Store {
  const store = memoryStore();
  const answered = new Map<string, IdempotencyRecord>();
  return {
    ...store,
    async claim(key, options): Promise<ClaimResult> {
      const result = await store.claim(key, options);
      if (result.claimed) return result;
      const cached = answered.get(key);
      if (cached !== undefined) return { claimed: false, record: cached };
      answered.set(key, result.record);
      return result;
    },
  };
}

/**
 * A store that reads the record first (from a replica it keeps) and, finding a dead lease, tries the
 * takeover: when another claim won it, it answers with the dead lease it read.
 */
function preReadStore(): Store {
  const store = memoryStore();
  const replica = new Map<string, IdempotencyRecord>();
  return {
    ...store,
    async claim(key, options): Promise<ClaimResult> {
      const read = replica.get(key);
      const result = await store.claim(key, options);
      const now = await store.get(key);
      if (now !== undefined) replica.set(key, now);
      const deadLease = read?.status === 'in_progress' && read.leaseUntil <= Date.now();
      return !result.claimed && deadLease ? { claimed: false, record: read } : result;
    },
  };
}

function losingClaimCheck(createStore: () => Store) {
  const check = storeConformanceChecks({ name: 'losing', createStore }).find((c) =>
    c.name.startsWith(CHECK),
  );
  if (check === undefined) throw new Error(`no check named like '${CHECK}'`);
  return check;
}

describe('the store conformance suite, on what a losing claim gets', () => {
  it('fails a store that answers a claim after the completion with an earlier in-progress record', async () => {
    await expect(losingClaimCheck(cachedLoserStore).run()).rejects.toThrow(
      /a claim after the completion got the in_progress record/,
    );
  });

  it('fails a store that answers the losers of a takeover with the dead lease they read', async () => {
    await expect(losingClaimCheck(preReadStore).run()).rejects.toThrow(
      /concurrent takeovers of a dead lease: a losing claim got .*which the winner replaced/,
    );
  });

  it('passes the memory store', async () => {
    await losingClaimCheck(() => memoryStore()).run();
  });
});
