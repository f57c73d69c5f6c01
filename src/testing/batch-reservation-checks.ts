/**
 * The conformance check of reservations in batches: `claimMany` and `completeAndClaimMany` apply
 * `reserveMs` as single claims do, each item seeing what an earlier item of the call did, and take a crashed
 * claim over with a larger token that fences the crashed holder out.
 * @module
 */
import assert from 'node:assert/strict';
import type { Store } from '../store/store.js';
import { type CheckKit, DAY, sleep } from './check-kit.js';
import type { StoreCheck } from './suite-options.js';

/**
 * Assert that a batch's takeover of `key` got a token above the crashed holder's, which stays fenced out.
 * A batch statement is often a second copy of the claim's SQL or script: one whose takeover branch forgot
 * to raise the token let the crashed holder, back from a pause, complete the new attempt's record.
 */
async function assertFencedTakeover(
  store: Store,
  key: string,
  token: number,
  crashedToken: number,
  path: string,
): Promise<void> {
  assert.ok(
    token > crashedToken,
    `${path}: a takeover got token ${token}, not above the crashed holder's ${crashedToken}`,
  );
  assert.equal(
    await store.complete(key, crashedToken, Buffer.from('stale'), DAY),
    false,
    `${path}: the crashed holder is fenced out of the record its takeover made`,
  );
}

/** The check of reservations in batch calls. */
export function batchReservationChecks({ check, lease }: CheckKit): StoreCheck[] {
  return [
    check('applies reservations in batches as single claims do', async (store, key) => {
      if (!store.capabilities.batch || !store.claimMany) return;
      const [a, b, c, d] = [key('a'), key('b'), key('c'), key('d')];
      const crashedTokens = new Map<string, number>();
      for (const k of [a, b, c, d]) {
        const crashed = await store.claim(k, { fingerprint: 'fp', leaseMs: lease, reserveMs: DAY });
        assert.ok(crashed.claimed, 'a claim of a free key wins (crashed)');
        crashedTokens.set(k, crashed.token);
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
      await assertFencedTakeover(store, b, rb.token, crashedTokens.get(b)!, 'claimMany');
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
      await assertFencedTakeover(
        store,
        c,
        rc2.token,
        crashedTokens.get(c)!,
        'completeAndClaimMany',
      );
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
