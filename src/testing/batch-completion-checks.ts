/**
 * The conformance checks of batched completions: `completeMany` fences each item by its own token, and
 * `completeAndClaimMany` completes, then claims, as separate calls would, and stores what it answers.
 * @module
 */
import assert from 'node:assert/strict';
import { type CheckKit, DAY } from './check-kit.js';
import { assertBytesEqual, assertCompleted, assertInProgress } from './record-assertions.js';
import type { StoreCheck } from './suite-options.js';

/** The checks of `completeMany` and `completeAndClaimMany`, on a store that has them. */
export function batchCompletionChecks({ check }: CheckKit): StoreCheck[] {
  return [
    check('completes a batch with per-item fencing', async (store, key) => {
      if (!store.capabilities.batch || !store.completeMany) return;
      const [a, b, c] = [key('a'), key('b'), key('c')];
      const ca = await store.claim(a, { fingerprint: 'fp', leaseMs: 60_000 });
      const cb = await store.claim(b, { fingerprint: 'fp', leaseMs: 60_000 });
      const cc = await store.claim(c, { fingerprint: 'fp', leaseMs: 60_000 });
      assert.ok(ca.claimed && cb.claimed && cc.claimed, 'a claim of a free key wins (ca, cb, cc)');
      assert.equal(await store.complete(c, cc.token, Buffer.from('c1'), DAY), true);
      const results = await store.completeMany([
        { key: a, token: ca.token, outcome: Buffer.from('a1'), retentionMs: DAY },
        { key: b, token: cb.token + 1, outcome: Buffer.from('wrong'), retentionMs: DAY },
        { key: c, token: cc.token, outcome: Buffer.from('c2'), retentionMs: DAY },
        { key: key('absent'), token: 1, outcome: Buffer.from('x'), retentionMs: DAY },
        { key: a, token: ca.token, outcome: Buffer.from('a2'), retentionMs: DAY },
      ]);
      assert.deepEqual(
        results,
        [true, false, true, false, true],
        'completeMany per item: the holder, a wrong token, a resend after success, an absent key, a ' +
          'resend within the batch',
      );
      assertBytesEqual(
        assertCompleted(await store.get(a), 'a').outcome,
        Buffer.from('a1'),
        'a kept its first outcome',
      );
      assert.equal(assertInProgress(await store.get(b), 'b').token, cb.token, 'b untouched');
      assertBytesEqual(
        assertCompleted(await store.get(c), 'c').outcome,
        Buffer.from('c1'),
        'c kept its outcome',
      );
      // Each item is fenced by its own token, never by any token of the batch (a statement matching
      // `key = ANY($keys) AND token = ANY($tokens)`): with tokens swapped, neither holder's key completes
      // unless both keys happen to hold the same token (a store counting tokens per key).
      const [x, y] = [key('x'), key('y')];
      const cx = await store.claim(x, { fingerprint: 'fp', leaseMs: 60_000 });
      const cy = await store.claim(y, { fingerprint: 'fp', leaseMs: 60_000 });
      assert.ok(cx.claimed && cy.claimed, 'a claim of a free key wins (cx, cy)');
      const same = cx.token === cy.token;
      assert.deepEqual(
        await store.completeMany([
          { key: x, token: cy.token, outcome: Buffer.from('swapped'), retentionMs: DAY },
          { key: y, token: cx.token, outcome: Buffer.from('swapped'), retentionMs: DAY },
        ]),
        [same, same],
        'completeMany fences each item by its own token, not by any token of the batch',
      );
    }),

    check('completes, then claims, in one call as separate calls would', async (store, key) => {
      if (!store.completeAndClaimMany) return;
      const [done, fenced, fresh, live] = [key('done'), key('fenced'), key('fresh'), key('live')];
      const cd = await store.claim(done, { fingerprint: 'fp-done', leaseMs: 60_000 });
      const cf = await store.claim(fenced, { fingerprint: 'fp', leaseMs: 60_000 });
      const cl = await store.claim(live, { fingerprint: 'fp-live', leaseMs: 60_000 });
      assert.ok(cd.claimed && cf.claimed && cl.claimed, 'a claim of a free key wins (cd, cf, cl)');
      const { completed, claimed } = await store.completeAndClaimMany(
        [
          { key: done, token: cd.token, outcome: Buffer.from('done'), retentionMs: DAY },
          { key: fenced, token: cf.token + 1, outcome: Buffer.from('wrong'), retentionMs: DAY },
        ],
        [
          { key: done, fingerprint: 'fp-done', leaseMs: 60_000 },
          { key: fresh, fingerprint: 'fp-fresh', leaseMs: 60_000 },
          { key: live, fingerprint: 'fp-other', leaseMs: 60_000 },
          { key: fresh, fingerprint: 'fp-again', leaseMs: 60_000 },
        ],
      );
      assert.deepEqual(completed, [true, false], 'each completion fenced by its own token');
      assert.equal(claimed.length, 4, 'one claim result per item, in order');
      const [rdone, rfresh, rlive, rfresh2] = claimed;
      assert.ok(rdone && !rdone.claimed, 'a key completed by the same call is not claimed');
      if (rdone && !rdone.claimed) {
        assertBytesEqual(
          assertCompleted(rdone.record, 'done').outcome,
          Buffer.from('done'),
          'the claim sees the outcome the same call stored',
        );
      }
      assert.ok(rfresh?.claimed, 'an absent key is claimed');
      assert.ok(rlive && !rlive.claimed, 'a live claim is not taken');
      if (rlive && !rlive.claimed) assert.equal(rlive.record.token, cl.token);
      assert.ok(rfresh2 && !rfresh2.claimed, 'a repeated key sees the earlier item of the call');
      if (rfresh2 && !rfresh2.claimed && rfresh?.claimed) {
        assert.equal(assertInProgress(rfresh2.record, 'fresh').token, rfresh.token);
      }
      assert.equal(
        assertInProgress(await store.get(fenced), 'fenced').token,
        cf.token,
        'a fenced-out completion changes nothing',
      );
      // What the call answered is what it stored: a completion it reported and lost lets the request run
      // again once the lease ends; a claim it reported and lost lets a second caller win the key at once.
      assertBytesEqual(
        assertCompleted(await store.get(done), 'completeAndClaimMany stored the completion')
          .outcome,
        Buffer.from('done'),
        'the outcome completeAndClaimMany stored',
      );
      if (rfresh?.claimed) {
        assert.equal(
          assertInProgress(await store.get(fresh), 'completeAndClaimMany stored the claim').token,
          rfresh.token,
          'the claim completeAndClaimMany stored',
        );
      }
      // Either list may be empty.
      const onlyCompletes = await store.completeAndClaimMany(
        [{ key: fenced, token: cf.token, outcome: Buffer.from('late'), retentionMs: DAY }],
        [],
      );
      assert.deepEqual(onlyCompletes, { completed: [true], claimed: [] });
      const solo = key('solo');
      const onlyClaims = await store.completeAndClaimMany(
        [],
        [{ key: solo, fingerprint: 'fp', leaseMs: 60_000 }],
      );
      assert.equal(onlyClaims.completed.length, 0);
      assert.ok(onlyClaims.claimed[0]?.claimed, 'a claim alone is claimed');
      assertCompleted(
        await store.get(fenced),
        'completeAndClaimMany of a completion alone stored it',
      );
      const soloClaim = onlyClaims.claimed[0];
      if (soloClaim?.claimed) {
        assert.equal(
          assertInProgress(await store.get(solo), 'completeAndClaimMany of a claim alone stored it')
            .token,
          soloClaim.token,
        );
      }
    }),
  ];
}
