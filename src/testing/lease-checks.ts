/**
 * The conformance checks of leases: an expired lease is taken over with a larger token, its holder is
 * fenced out of every write path even when nobody took it over, and `extend` keeps a held lease alive.
 * @module
 */
import assert from 'node:assert/strict';
import { type CheckKit, DAY, sleep } from './check-kit.js';
import { assertBytesEqual, assertCompleted, assertInProgress } from './record-assertions.js';
import type { StoreCheck } from './suite-options.js';

/** The checks of takeovers, of holders whose lease expired, and of extensions. */
export function leaseChecks({ check, lease }: CheckKit): StoreCheck[] {
  return [
    check(
      'takes over an expired lease with a larger token and fences the stale holder',
      async (store, key) => {
        const k = key();
        const stale = await store.claim(k, { fingerprint: 'fp', leaseMs: lease });
        assert.ok(stale.claimed, 'a claim of a free key wins (stale)');
        await sleep(lease + 150);
        const fresh = await store.claim(k, { fingerprint: 'fp', leaseMs: 60_000 });
        assert.ok(fresh.claimed, 'expired lease must be taken over');
        assert.ok(fresh.token > stale.token, 'token grows on takeover');
        assert.ok(fresh.attempt >= 1, 'a takeover’s attempt is a positive number');
        assert.equal(
          await store.complete(k, stale.token, Buffer.from('stale'), DAY),
          false,
          'stale complete',
        );
        assert.equal(await store.extend(k, stale.token, 60_000), false, 'stale extend');
        assert.equal(await store.release(k, stale.token), false, 'stale release');
        const record = assertInProgress(await store.get(k), 'newer attempt intact');
        assert.equal(record.token, fresh.token);
        assert.equal(await store.complete(k, fresh.token, Buffer.from('fresh'), DAY), true);
        assertBytesEqual(
          assertCompleted(await store.get(k), 'done').outcome,
          Buffer.from('fresh'),
          'out',
        );
      },
    ),

    check('counts takeovers in attempt while the record survives', async (store, key) => {
      const k = key();
      const first = await store.claim(k, { fingerprint: 'fp', leaseMs: lease });
      assert.ok(first.claimed, 'a claim of a free key wins (first)');
      await sleep(lease + 150);
      const second = await store.claim(k, { fingerprint: 'fp', leaseMs: 60_000 });
      assert.ok(second.claimed, 'a claim of a free key wins (second)');
      // A store that keeps dead leases reports attempt 2; one whose lease keys vanish (Redis) starts at 1.
      assert.ok(second.attempt === 2 || second.attempt === 1, `attempt was ${second.attempt}`);
      assert.equal(assertInProgress(await store.get(k), 'record').attempt, second.attempt);
    }),

    check(
      'refuses completion by a holder whose lease expired, even without a takeover',
      async (store, key) => {
        const k = key();
        const claim = await store.claim(k, { fingerprint: 'fp', leaseMs: lease });
        assert.ok(claim.claimed, 'a claim of a free key wins (claim)');
        await sleep(lease + 150);
        assert.equal(
          await store.complete(k, claim.token, Buffer.from('late'), DAY),
          false,
          'complete of an expired lease (compare the lease with the store’s now, not only the token)',
        );
        assert.equal(await store.get(k), undefined, 'an expired lease is not a live record');
      },
    ),

    // The same rule on every other write path of a holder: a store with two code paths (one per call and
    // one per batch, say) easily checks the lease on one and only the token on the other.
    check(
      'refuses extend, release and batched completions by a holder whose lease expired, even without a takeover',
      async (store, key) => {
        const paths = ['extend', 'release', 'completeMany', 'completeAndClaimMany'] as const;
        const held = new Map<string, { key: string; token: number }>();
        for (const path of paths) {
          const k = key(path);
          const claim = await store.claim(k, { fingerprint: 'fp', leaseMs: lease });
          assert.ok(claim.claimed, 'a claim of a free key wins (claim)');
          held.set(path, { key: k, token: claim.token });
        }
        const k = (path: (typeof paths)[number]) => held.get(path)!;
        await sleep(lease + 150);

        const extended = k('extend');
        assert.equal(
          await store.extend(extended.key, extended.token, 60_000),
          false,
          'extend of an expired lease',
        );
        assert.equal(await store.get(extended.key), undefined, 'the expired lease stays dead');
        const next = await store.claim(extended.key, { fingerprint: 'fp', leaseMs: 60_000 });
        assert.ok(next.claimed, 'a new attempt takes the key whose holder failed to extend');

        const released = k('release');
        assert.equal(
          await store.release(released.key, released.token),
          false,
          'release of an expired lease',
        );

        const outcome = { outcome: Buffer.from('late'), retentionMs: DAY };
        if (store.capabilities.batch && store.completeMany) {
          const late = k('completeMany');
          assert.deepEqual(
            await store.completeMany([{ ...late, ...outcome }]),
            [false],
            'completeMany of an expired lease',
          );
          assert.equal(await store.get(late.key), undefined, 'completeMany stored no outcome');
        }
        if (store.completeAndClaimMany) {
          const late = k('completeAndClaimMany');
          const { completed } = await store.completeAndClaimMany([{ ...late, ...outcome }], []);
          assert.deepEqual(completed, [false], 'completeAndClaimMany of an expired lease');
          assert.equal(
            await store.get(late.key),
            undefined,
            'completeAndClaimMany stored no outcome',
          );
        }
      },
    ),

    check('extends a held lease so that it outlives its first expiry', async (store, key) => {
      const k = key();
      const claim = await store.claim(k, { fingerprint: 'fp', leaseMs: lease });
      assert.ok(claim.claimed, 'a claim of a free key wins (claim)');
      await sleep(lease / 2);
      assert.equal(await store.extend(k, claim.token, lease * 4), true);
      await sleep(lease);
      const other = await store.claim(k, { fingerprint: 'fp', leaseMs: 60_000 });
      assert.equal(other.claimed, false, 'extended lease still holds');
      assert.equal(await store.complete(k, claim.token, Buffer.from('ok'), DAY), true);
    }),
  ];
}
