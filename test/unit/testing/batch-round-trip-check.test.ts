/**
 * `capabilities.batch` promises one round trip per batch call. Given a counter of the requests a store
 * sends (`roundTrips`), the suite must fail a store that declares batches but sends one request per item,
 * which every other check passes (its results are right, only its cost is not), and pass one that sends
 * each batch as one request. The memory store stands in for the backend: each of its calls is a request.
 */
import { describe, expect, it } from 'vitest';
import { type ClaimResult, memoryStore, type Store } from '../../../src/index.js';
import { storeConformanceChecks } from '../../../src/testing/index.js';

const CHECK = 'sends each batch call as one round trip';

/** A store over a backend that counts its requests; `perItem`: batches loop over single requests. */
function countedStore(perItem: boolean) {
  const backend = memoryStore();
  let requests = 0;
  const request = <T>(call: () => Promise<T>) => {
    requests++;
    return call();
  };
  const store: Store = {
    ...backend,
    claim: (key, options) => request(() => backend.claim(key, options)),
    complete: (key, token, outcome, retentionMs) =>
      request(() => backend.complete(key, token, outcome, retentionMs)),
    async claimMany(claims) {
      if (!perItem) return request(() => backend.claimMany(claims));
      const results: ClaimResult[] = [];
      for (const { key, ...options } of claims) results.push(await store.claim(key, options));
      return results;
    },
    async completeMany(completions) {
      if (!perItem) return request(() => backend.completeMany(completions));
      const results: boolean[] = [];
      for (const c of completions) {
        results.push(await store.complete(c.key, c.token, c.outcome, c.retentionMs));
      }
      return results;
    },
    completeAndClaimMany: (completes, claims) =>
      request(() => backend.completeAndClaimMany(completes, claims)),
  };
  return { store, roundTrips: () => requests };
}

function roundTripCheck(perItem: boolean) {
  const { store, roundTrips } = countedStore(perItem);
  const checks = storeConformanceChecks({ name: 'counted', createStore: () => store, roundTrips });
  const check = checks.find((c) => c.name.startsWith(CHECK));
  if (check === undefined) throw new Error(`no check named like '${CHECK}'`);
  return { check, checks };
}

describe('the store conformance suite, on batch round trips', () => {
  it('fails a store that declares batches but sends one request per item', async () => {
    const { check, checks } = roundTripCheck(true);
    // Its results are right: the batch checks pass it.
    await checks.find((c) => c.name.startsWith('claims a batch exactly as sequential'))!.run();
    await expect(check.run()).rejects.toThrow(
      /claimMany of 8 distinct keys is one round trip \(capabilities.batch\)/,
    );
  });

  it('passes a store that sends each batch as one request', async () => {
    await roundTripCheck(false).check.run();
  });

  it('is not among the checks without a counter', () => {
    const checks = storeConformanceChecks({ name: 'memory', createStore: () => memoryStore() });
    expect(checks.some((c) => c.name.startsWith(CHECK))).toBe(false);
  });
});
