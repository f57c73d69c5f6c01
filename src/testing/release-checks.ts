/**
 * The conformance checks of `release`: it frees the holder's key for a next claim with a larger token
 * (however soon, however often), and never touches a completed record.
 * @module
 */
import assert from 'node:assert/strict';
import { type CheckKit, DAY } from './check-kit.js';
import { assertCompleted } from './record-assertions.js';
import type { StoreCheck } from './suite-options.js';

/** The checks of releases. */
export function releaseChecks({ check }: CheckKit): StoreCheck[] {
  return [
    check(
      'releases the holder’s claim so the next claim wins with a larger token',
      async (store, key) => {
        const k = key();
        const first = await store.claim(k, { fingerprint: 'fp', leaseMs: 60_000 });
        assert.ok(first.claimed, 'a claim of a free key wins (first)');
        assert.equal(await store.release(k, first.token), true);
        assert.equal(await store.get(k), undefined);
        const second = await store.claim(k, { fingerprint: 'fp2', leaseMs: 60_000 });
        assert.ok(second.claimed, 'released key can be claimed again');
        assert.ok(second.token > first.token, 'a zombie of the first claim can never match');
        assert.equal(
          await store.complete(k, first.token, Buffer.from('zombie'), DAY),
          false,
          'complete by the released claim’s token',
        );
        // Released and claimed again at once, many times: no record survives a release to count from,
        // and a clock (even the backend's) may read the same millisecond for all of them (rule 3).
        let previous = second.token;
        assert.equal(await store.release(k, second.token), true);
        for (let i = 0; i < 20; i++) {
          const next = await store.claim(k, { fingerprint: 'fp', leaseMs: 60_000 });
          assert.ok(next.claimed, 'a released key is claimed again');
          assert.ok(
            next.token > previous,
            `a claim right after a release got token ${next.token}, not above the released ${previous}: ` +
              'derive tokens from a counter or sequence, never from the clock alone (rule 3)',
          );
          assert.equal(await store.release(k, next.token), true);
          previous = next.token;
        }
      },
    ),

    check('never releases or extends a completed record', async (store, key) => {
      const k = key();
      const claim = await store.claim(k, { fingerprint: 'fp', leaseMs: 60_000 });
      assert.ok(claim.claimed, 'a claim of a free key wins (claim)');
      assert.equal(await store.complete(k, claim.token, Buffer.from('done'), DAY), true);
      assert.equal(await store.release(k, claim.token), false, 'release');
      assert.equal(await store.extend(k, claim.token, 60_000), false, 'extend');
      assertCompleted(await store.get(k), 'still completed');
    }),
  ];
}
