/**
 * The checks a store author meets first say what is wrong in the store's terms, not only `false !==
 * true`: a resend of `complete` reported as a failure (a MySQL client counting changed rows, not matched
 * ones), and a completion accepted on an expired lease.
 */
import { describe, expect, it } from 'vitest';
import { memoryStore, type Store } from '../../../src/index.js';
import { storeConformanceChecks } from '../../../src/testing/index.js';

/** `complete` reports `false` when the record is already completed, as `affectedRows` without found rows. */
function changedRowsStore(): Store {
  const store = memoryStore();
  return {
    ...store,
    async complete(key, token, outcome, retentionMs) {
      const before = await store.get(key);
      const done = await store.complete(key, token, outcome, retentionMs);
      return done && before?.status !== 'completed';
    },
  };
}

/** `complete` succeeds for the token of a lease that has ended (the lease is not compared). */
function leaseBlindCompleteStore(): Store {
  const store = memoryStore();
  return { ...store, complete: async () => true };
}

/** Hands out a key's first token forever: a claim after the outcome expired keeps the old token. */
function keptTokenStore(): Store {
  const store = memoryStore();
  const first = new Map<string, number>();
  const real = new Map<string, number>();
  const inner = (key: string, token: number) => (first.get(key) === token ? real.get(key)! : -1);
  return {
    ...store,
    async claim(key, options) {
      const result = await store.claim(key, options);
      if (!result.claimed) return result;
      if (!first.has(key)) first.set(key, result.token);
      real.set(key, result.token);
      return { ...result, token: first.get(key)! };
    },
    complete: (key, token, outcome, retentionMs) =>
      store.complete(key, inner(key, token), outcome, retentionMs),
  };
}

function checkNamed(createStore: () => Store, fragment: string) {
  const check = storeConformanceChecks({ name: 'messages', createStore }).find((c) =>
    c.name.includes(fragment),
  );
  if (check === undefined) throw new Error(`no check named like '${fragment}'`);
  return check;
}

describe('the store conformance suite’s messages', () => {
  it('names found rows when a resend of complete reports a failure', async () => {
    const check = checkNamed(changedRowsStore, 'repeated complete by the same token');
    await expect(check.run()).rejects.toThrow(/a resend of complete .*CLIENT_FOUND_ROWS/);
  });

  it('names the per-item expectation of completeMany', async () => {
    const batch = () => {
      const inner = changedRowsStore();
      return {
        ...inner,
        completeMany: (requests: Parameters<NonNullable<Store['completeMany']>>[0]) =>
          Promise.all(
            requests.map((r) => inner.complete(r.key, r.token, r.outcome, r.retentionMs)),
          ),
      };
    };
    await expect(checkNamed(batch, 'per-item fencing').run()).rejects.toThrow(
      /completeMany per item: the holder, a wrong token, a resend after success/,
    );
  });

  // Without a message, Node's assert builds one from the source at the call site, which under tsx (the
  // way a node:test user runs TypeScript checks) never returned: the check hung instead of failing.
  it('names the token rule when a claim after an expired outcome keeps the old token', async () => {
    const check = checkNamed(keptTokenStore, 'forgets a completed record after its retention');
    await expect(check.run()).rejects.toThrow(
      /the key is new again: its claim gets a larger token/,
    );
  });

  it('names the expired lease when a holder completes after it', async () => {
    const check = checkNamed(leaseBlindCompleteStore, 'refuses completion by a holder whose lease');
    await expect(check.run()).rejects.toThrow(/complete of an expired lease/);
  });
});
