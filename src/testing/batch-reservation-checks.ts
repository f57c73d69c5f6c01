/**
 * The conformance check of reservations in batches: `claimMany` and `completeAndClaimMany` apply
 * `reserveMs` as single claims do, each item seeing what an earlier item of the call did.
 * @module
 */
import assert from 'node:assert/strict';
import { type CheckKit, DAY, sleep } from './check-kit.js';
import type { StoreCheck } from './suite-options.js';

/** The check of reservations in batch calls. */
export function batchReservationChecks({ check, lease }: CheckKit): StoreCheck[] {
  return [
    check('applies reservations in batches as single claims do', async (store, key) => {
      if (!store.capabilities.batch || !store.claimMany) return;
      const [a, b, c, d] = [key('a'), key('b'), key('c'), key('d')];
      for (const k of [a, b, c, d]) {
        const crashed = await store.claim(k, { fingerprint: 'fp', leaseMs: lease, reserveMs: DAY });
        assert.ok(crashed.claimed, 'a claim of a free key wins (crashed)');
      }
      await sleep(lease + 150);
      const results = await store.claimMany([
        { key: a, fingerprint: 'fp-other', leaseMs: 60_000, reserveMs: DAY },
        { key: b, fingerprint: 'fp', leaseMs: lease, reserveMs: DAY },
      ]);
      const [ra, rb] = results;
      assert.ok(ra && !ra.claimed, 'claimMany: another fingerprint is refused');
      if (ra && !ra.claimed) assert.equal(ra.record.fingerprint, 'fp');
      assert.ok(rb?.claimed, 'claimMany: the same fingerprint takes over');
      assert.equal(rb.attempt, 2);
      // A later item of the batch sees what an earlier item did to the key, not what was stored before.
      const [rd, rd2] = await store.claimMany([
        { key: d, fingerprint: 'fp', leaseMs: 60_000, reserveMs: DAY },
        { key: d, fingerprint: 'fp-other', leaseMs: 60_000, reserveMs: DAY },
      ]);
      assert.ok(rd?.claimed, 'claimMany: the same fingerprint takes over first');
      assert.ok(rd2 && !rd2.claimed, 'claimMany: then another fingerprint is refused');
      if (rd2 && !rd2.claimed) {
        assert.equal(rd2.record.token, rd.token, 'by the claim the earlier item made');
      }
      if (!store.completeAndClaimMany) return;
      const both = await store.completeAndClaimMany(
        [],
        [
          { key: c, fingerprint: 'fp-other', leaseMs: 60_000, reserveMs: DAY },
          { key: c, fingerprint: 'fp', leaseMs: 60_000, reserveMs: DAY },
        ],
      );
      const [rc, rc2] = both.claimed;
      assert.ok(rc && !rc.claimed, 'completeAndClaimMany: another fingerprint is refused');
      assert.ok(rc2?.claimed, 'completeAndClaimMany: the same fingerprint takes over');
      // The takeover reserved the key again, from now.
      await sleep(lease + 150);
      const later = await store.claimMany([
        { key: b, fingerprint: 'fp-other', leaseMs: 60_000 },
        { key: key('fresh'), fingerprint: 'fp', leaseMs: 60_000 },
      ]);
      assert.ok(later[0] && !later[0].claimed, 'a takeover renews the reservation');
      assert.ok(later[1]?.claimed, 'a claim of a free key wins (fresh)');
    }),
  ];
}
