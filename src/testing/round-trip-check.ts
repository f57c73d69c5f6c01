/**
 * The conformance check of `capabilities.batch`'s promise: `claimMany`, `completeMany` and
 * `completeAndClaimMany` each reach the backend in one round trip. Nothing a store returns tells how many
 * requests it sent, so the check counts them through a counter the suite is given (`roundTrips`: the test
 * counts the commands or statements its client sends, outside the store). Without one it checks nothing:
 * a store that loops over single calls inside `claimMany` is correct, only slow, and the engine, which
 * batches under load for stores that declare `batch`, then adds a wait to each call and saves nothing.
 * @module
 */
import assert from 'node:assert/strict';
import type { Store } from '../store/store.js';
import { DAY } from './check-kit.js';

/** What the check needs besides the store under test. */
export interface RoundTripCheckContext {
  /** A unique key of the check. */
  key(label?: string): string;
  /** The requests the store has sent to its backend so far (the suite's `roundTrips` option). */
  roundTrips: () => number | Promise<number>;
}

// Distinct keys: a store may send a batch's repeated keys one by one (each must see the one before).
const ITEMS = 8;

/** Check that every batch call of `store` is one round trip, after one unmeasured call of each. */
export async function checkBatchRoundTrips(
  store: Store,
  context: RoundTripCheckContext,
): Promise<void> {
  const { key, roundTrips } = context;
  if (!store.capabilities.batch || !store.claimMany || !store.completeMany) return;
  const claimMany = store.claimMany.bind(store);
  const completeMany = store.completeMany.bind(store);
  const claims = (label: string) =>
    Array.from({ length: ITEMS }, (_, i) => ({
      key: key(`${label}${i}`),
      fingerprint: 'fp',
      leaseMs: 60_000,
    }));
  const completions = async (label: string) => {
    const requests = claims(label);
    const results = await claimMany(requests);
    return results.map((result, i) => {
      assert.ok(result.claimed, 'a claim of a free key wins');
      return {
        key: requests[i]!.key,
        token: result.token,
        outcome: Buffer.from('ok'),
        retentionMs: DAY,
      };
    });
  };
  /** The round trips `call` took. */
  async function counted(call: () => Promise<unknown>): Promise<number> {
    const before = await roundTrips();
    await call();
    return (await roundTrips()) - before;
  }

  // A first call may load a script or prepare a statement: measure the second.
  await completeMany(await completions('warm'));
  assert.equal(
    await counted(() => claimMany(claims('claims'))),
    1,
    `claimMany of ${ITEMS} distinct keys is one round trip (capabilities.batch)`,
  );
  const toComplete = await completions('completes');
  assert.equal(
    await counted(() => completeMany(toComplete)),
    1,
    `completeMany of ${ITEMS} distinct keys is one round trip (capabilities.batch)`,
  );
  if (store.completeAndClaimMany === undefined) return;
  const completeAndClaimMany = store.completeAndClaimMany.bind(store);
  await completeAndClaimMany(await completions('warm-both'), claims('warm-both-claims'));
  const both = await completions('both');
  assert.equal(
    await counted(() => completeAndClaimMany(both, claims('both-claims'))),
    1,
    `completeAndClaimMany of ${ITEMS} completions and ${ITEMS} claims is one round trip`,
  );
}
