/**
 * Rule 4 of the store contract ("an expired lease is lost") on every write path of a holder: the suite
 * must fail a store that checks the lease on `complete` but only the token on `extend`, `release` or its
 * batch completions, as a SQL store whose UPDATE forgot `AND lease_until > now()` on one path does.
 */
import { describe, expect, it } from 'vitest';
import { memoryStore, type Store } from '../../../src/index.js';
import { storeConformanceChecks } from '../../../src/testing/index.js';
import { type LeaseBlindFaults, leaseBlindStore } from '../../helpers/lease-blind-store.js';

const CHECK = 'refuses extend, release and batched completions by a holder whose lease expired';

function lostLeaseCheck(createStore: () => Store) {
  const check = storeConformanceChecks({ name: 'lease', createStore }).find((c) =>
    c.name.startsWith(CHECK),
  );
  if (check === undefined) throw new Error(`no check named like '${CHECK}'`);
  return check;
}

describe('the store conformance suite, on a holder whose lease expired', () => {
  const cases: Array<[keyof LeaseBlindFaults, RegExp]> = [
    ['extend', /extend of an expired lease/],
    ['release', /release of an expired lease/],
    ['completeMany', /completeMany of an expired lease/],
    ['completeAndClaimMany', /completeAndClaimMany of an expired lease/],
  ];
  for (const [path, message] of cases) {
    it(`fails a store whose ${path} accepts the token of an expired lease`, async () => {
      const check = lostLeaseCheck(() => leaseBlindStore({ [path]: true }));
      await expect(check.run()).rejects.toThrow(message);
    });
  }

  it('passes the memory store, and the lease-blind store with no fault put in', async () => {
    await lostLeaseCheck(() => memoryStore()).run();
    await lostLeaseCheck(() => leaseBlindStore({})).run();
  });
});
