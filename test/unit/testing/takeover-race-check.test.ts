/**
 * Rule 1 of the store contract on the takeover path: the suite must fail a store whose claim of an absent
 * key is atomic but whose takeover of a dead record reads it and then writes, which every other check (and
 * the cross-process storm, whose leases never end) passes.
 */
import { describe, expect, it } from 'vitest';
import { memoryStore, type Store } from '../../../src/index.js';
import { storeConformanceChecks } from '../../../src/testing/index.js';

const CHECK = 'gives exactly one winner among concurrent takeovers';

/**
 * A store that, finding the record it last saw for a key dead, deletes it and claims the key anew: each
 * concurrent caller that read the dead record deletes the record the previous one just claimed.
 */
function racyTakeoverStore(): Store {
  const store = memoryStore();
  const seen = new Map<string, number>();
  return {
    ...store,
    async claim(key, options) {
      const deadSince = seen.get(key);
      if (deadSince !== undefined && deadSince <= Date.now()) {
        await new Promise((resolve) => setImmediate(resolve));
        await store.delete(key);
      }
      const result = await store.claim(key, options);
      if (result.claimed) seen.set(key, result.leaseUntil);
      return result;
    },
    async complete(key, token, outcome, retentionMs) {
      const done = await store.complete(key, token, outcome, retentionMs);
      if (done) seen.set(key, Date.now() + retentionMs);
      return done;
    },
  };
}

function takeoverCheck(createStore: () => Store) {
  const check = storeConformanceChecks({ name: 'takeover', createStore }).find((c) =>
    c.name.startsWith(CHECK),
  );
  if (check === undefined) throw new Error(`no check named like '${CHECK}'`);
  return check;
}

describe('the store conformance suite, on concurrent takeovers', () => {
  it('fails a store that takes a dead record over by reading it and then writing', async () => {
    await expect(takeoverCheck(racyTakeoverStore).run()).rejects.toThrow(
      /exactly one winner among 20 concurrent takeovers of an expired lease/,
    );
  });

  it('passes the memory store', async () => {
    await takeoverCheck(() => memoryStore()).run();
  });
});
