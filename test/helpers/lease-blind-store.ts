/**
 * A store that forgets rule 4 of the store contract ("an expired lease is lost") on some of its write
 * paths, as a SQL store does whose `UPDATE … WHERE key = $1 AND token = $2` lacks `AND lease_until >
 * now()`: a holder whose lease ran out, with nobody taken over yet, still extends (reviving its dead
 * lease), releases, or completes through a batch. Everything else is the memory store's.
 */
import { type CompleteRequest, memoryStore, type Store } from '../../src/index.js';

/** Which write paths skip the lease check. */
export interface LeaseBlindFaults {
  extend?: boolean;
  release?: boolean;
  completeMany?: boolean;
  completeAndClaimMany?: boolean;
}

/** A memory store whose chosen paths accept the token of an expired lease. */
export function leaseBlindStore(faults: LeaseBlindFaults): Store {
  // The memory store judges leases by its clock: a blind call runs with the clock held just before the
  // holder's lease ended, which is what skipping the check amounts to.
  let heldAt: number | undefined;
  const inner = memoryStore({ clock: { now: () => heldAt ?? Date.now() } });
  const leases = new Map<string, { token: number; leaseUntil: number }>();

  /** `call` as if the lease `token` holds on `key` had not ended (its memory-store work is synchronous). */
  function blind<T>(key: string, token: number, call: (now: number) => Promise<T>): Promise<T> {
    const now = Date.now();
    const lease = leases.get(key);
    if (lease === undefined || lease.token !== token || lease.leaseUntil > now) return call(now);
    heldAt = lease.leaseUntil - 1;
    try {
      return call(now);
    } finally {
      heldAt = undefined;
    }
  }

  const store: Store = {
    ...inner,
    name: 'lease-blind',
    async claim(key, options) {
      const result = await inner.claim(key, options);
      if (result.claimed) leases.set(key, { token: result.token, leaseUntil: result.leaseUntil });
      return result;
    },
  };
  if (faults.extend) {
    store.extend = (key, token, leaseMs) =>
      blind(key, token, (now) => {
        const extended = inner.extend(key, token, leaseMs + (now - (heldAt ?? now)));
        leases.set(key, { token, leaseUntil: now + leaseMs });
        return extended;
      });
  }
  if (faults.release) {
    store.release = (key, token) => blind(key, token, () => inner.release(key, token));
  }
  const blindComplete = (request: CompleteRequest) =>
    blind(request.key, request.token, () =>
      inner.complete(request.key, request.token, request.outcome, request.retentionMs),
    );
  if (faults.completeMany) {
    store.completeMany = (requests) => Promise.all(requests.map(blindComplete));
  }
  if (faults.completeAndClaimMany) {
    store.completeAndClaimMany = async (completes, claims) => {
      const completed = await Promise.all(completes.map(blindComplete));
      const claimed = [];
      for (const claim of claims) claimed.push(await store.claim(claim.key, claim));
      return { completed, claimed };
    };
  }
  return store;
}
