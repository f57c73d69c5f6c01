/**
 * The conformance checks of completion and fencing: the holder's `complete` stores the outcome that later
 * claims replay for its whole retention, a resend by the same token changes nothing, and a wrong token
 * changes nothing at all.
 * @module
 */
import assert from 'node:assert/strict';
import { type CheckKit, DAY, sleep } from './check-kit.js';
import { assertBytesEqual, assertCompleted, assertInProgress } from './record-assertions.js';
import type { StoreCheck } from './suite-options.js';

/** The checks of completion, its resends, and fencing by token. */
export function completionChecks({ check, lease }: CheckKit): StoreCheck[] {
  return [
    check(
      'completes the holder’s claim and replays the outcome to later claims',
      async (store, key) => {
        const k = key();
        const claim = await store.claim(k, { fingerprint: 'fp', leaseMs: 60_000 });
        assert.ok(claim.claimed, 'a claim of a free key wins (claim)');
        const outcome = Buffer.from('{"ok":true}');
        assert.equal(await store.complete(k, claim.token, outcome, DAY), true);
        const record = assertCompleted(await store.get(k), 'get after complete');
        assertBytesEqual(record.outcome, outcome, 'stored outcome');
        assert.equal(record.fingerprint, 'fp');
        assert.equal(record.token, claim.token);
        assert.ok(record.expiresAt > Date.now() + DAY / 2, 'expiresAt reflects retention');
        const again = await store.claim(k, { fingerprint: 'fp', leaseMs: 60_000 });
        assert.equal(again.claimed, false, 'a completed record is never claimed');
        if (!again.claimed)
          assertBytesEqual(assertCompleted(again.record, 'claim').outcome, outcome, 'claim');
      },
    ),

    check(
      'treats a repeated complete by the same token as success and changes nothing',
      async (store, key) => {
        const k = key();
        const claim = await store.claim(k, { fingerprint: 'fp', leaseMs: 60_000 });
        assert.ok(claim.claimed, 'a claim of a free key wins (claim)');
        assert.equal(await store.complete(k, claim.token, Buffer.from('one'), DAY), true);
        assert.equal(
          await store.complete(k, claim.token, Buffer.from('two'), DAY),
          true,
          'a resend of complete by the token that completed must report success (a SQL UPDATE that ' +
            'changes nothing must still count the row it matched: CLIENT_FOUND_ROWS on MySQL and MariaDB)',
        );
        const record = assertCompleted(await store.get(k), 'after resend');
        assertBytesEqual(record.outcome, Buffer.from('one'), 'first outcome kept');
      },
    ),

    check('fences out complete, extend and release with a wrong token', async (store, key) => {
      const k = key();
      const claim = await store.claim(k, { fingerprint: 'fp', leaseMs: 60_000 });
      assert.ok(claim.claimed, 'a claim of a free key wins (claim)');
      const wrong = claim.token + 1;
      assert.equal(await store.complete(k, wrong, Buffer.from('x'), DAY), false, 'complete');
      assert.equal(await store.extend(k, wrong, 60_000), false, 'extend');
      assert.equal(await store.release(k, wrong), false, 'release');
      const record = assertInProgress(await store.get(k), 'record untouched');
      assert.equal(record.token, claim.token);
      // The resend rule is the completing token's alone: a completed record fences out every other one, so
      // a stale holder never hears that an outcome it did not store is stored.
      assert.equal(await store.complete(k, claim.token, Buffer.from('done'), DAY), true);
      assert.equal(
        await store.complete(k, wrong, Buffer.from('x'), DAY),
        false,
        'complete of a completed record by another token (only the completing token may resend)',
      );
      assertBytesEqual(
        assertCompleted(await store.get(k), 'completed').outcome,
        Buffer.from('done'),
        'the outcome stays the holder’s',
      );
    }),

    // A completed record is judged by its retention alone: a claim whose claimable test reads the lease
    // column whatever the status (`lease_until <= now()`) took a completed key over once the lease that
    // produced it had ended, and executed the request again.
    check(
      'keeps a completed record for its whole retention, past the lease of the claim that made it',
      async (store, key) => {
        const k = key();
        const claim = await store.claim(k, { fingerprint: 'fp', leaseMs: lease });
        assert.ok(claim.claimed, 'a claim of a free key wins (claim)');
        assert.equal(await store.complete(k, claim.token, Buffer.from('done'), DAY), true);
        await sleep(lease + 150);
        const again = await store.claim(k, { fingerprint: 'fp', leaseMs: 60_000 });
        assert.equal(
          again.claimed,
          false,
          'a completed record was claimed once its claim’s lease had ended: judge a completed record by ' +
            'its retention (expires_at), never by the lease it was claimed with',
        );
        if (!again.claimed) {
          assertBytesEqual(
            assertCompleted(again.record, 'claim').outcome,
            Buffer.from('done'),
            'replay',
          );
        }
        assertCompleted(await store.get(k), 'get after the lease ended');
      },
    ),
  ];
}
