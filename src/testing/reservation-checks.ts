/**
 * The conformance checks of reservations (`reserveMs`): a crashed claim's key stays reserved for its
 * fingerprint, through extensions, takeovers and purges, until the reservation ends or the holder releases
 * it.
 * @module
 */
import assert from 'node:assert/strict';
import { type CheckKit, DAY, sleep } from './check-kit.js';
import { assertInProgress } from './record-assertions.js';
import type { StoreCheck } from './suite-options.js';

/** The checks of reservations on single claims. */
export function reservationChecks({ check, lease }: CheckKit): StoreCheck[] {
  return [
    check(
      'keeps a crashed claim’s key reserved for its fingerprint: the same request takes it over',
      async (store, key) => {
        const k = key();
        const crashed = await store.claim(k, {
          fingerprint: 'fp-a',
          leaseMs: lease,
          reserveMs: DAY,
        });
        assert.ok(crashed.claimed, 'a claim of a free key wins (crashed)');
        await sleep(lease + 150);
        const other = await store.claim(k, {
          fingerprint: 'fp-b',
          leaseMs: 60_000,
          reserveMs: DAY,
        });
        assert.equal(other.claimed, false, 'another fingerprint must not take a reserved key');
        if (!other.claimed) {
          const record = assertInProgress(other.record, 'the reserved record is returned');
          assert.equal(record.fingerprint, 'fp-a', 'with the crashed claim’s fingerprint');
          assert.equal(record.token, crashed.token);
        }
        assert.equal(await store.get(k), undefined, 'a dead lease is still not a live record');
        assert.equal(
          await store.complete(k, crashed.token, Buffer.from('late'), DAY),
          false,
          'the crashed holder stays fenced out',
        );
        const same = await store.claim(k, { fingerprint: 'fp-a', leaseMs: 60_000, reserveMs: DAY });
        assert.ok(same.claimed, 'the same fingerprint takes the key over');
        assert.ok(same.token > crashed.token, 'token grows on takeover');
        assert.equal(same.attempt, 2, 'the reserved record counts the takeover');
        assert.equal(await store.complete(k, same.token, Buffer.from('done'), DAY), true);
      },
    ),
    check(
      'frees a crashed claim’s key for any request once its reservation ends',
      async (store, key) => {
        const k = key();
        const crashed = await store.claim(k, {
          fingerprint: 'fp-a',
          leaseMs: lease,
          reserveMs: lease * 2,
        });
        assert.ok(crashed.claimed, 'a claim of a free key wins (crashed)');
        await sleep(lease * 2 + 150);
        const other = await store.claim(k, { fingerprint: 'fp-b', leaseMs: 60_000 });
        assert.ok(other.claimed, 'an ended reservation blocks nothing');
        assert.ok(other.token > crashed.token, 'token grows');
        // The record is the new request's now: a takeover that kept the crashed request's fingerprint
        // (an upsert that forgot to set it) would replay this request's outcome to the crashed one's
        // retries, and answer this one's own retries with a mismatch.
        assert.equal(
          assertInProgress(await store.get(k), 'the takeover').fingerprint,
          'fp-b',
          'a takeover by another request records its fingerprint',
        );
        const unreserved = key('unreserved');
        assert.ok((await store.claim(unreserved, { fingerprint: 'fp-a', leaseMs: lease })).claimed);
        await sleep(lease + 150);
        const next = await store.claim(unreserved, { fingerprint: 'fp-b', leaseMs: 60_000 });
        assert.ok(next.claimed, 'without reserveMs the key is free once the lease ends');
      },
    ),
    // Each takeover reserves the key anew, from its own claim (as it gets its lease): a store whose
    // takeover left the first claim's `reserved_until` in place let another request take the key once
    // that first reservation ended, while the takeover's own had a day to run.
    check(
      'renews the reservation on a takeover, so that a crashed takeover keeps the key for its request',
      async (store, key) => {
        const k = key();
        const first = await store.claim(k, {
          fingerprint: 'fp-a',
          leaseMs: lease,
          reserveMs: lease * 2,
        });
        assert.ok(first.claimed, 'a claim of a free key wins (first)');
        await sleep(lease + 100);
        const takeover = await store.claim(k, {
          fingerprint: 'fp-a',
          leaseMs: lease,
          reserveMs: DAY,
        });
        assert.ok(takeover.claimed, 'the same fingerprint takes the crashed claim over');
        // Past the first claim's reservation and the takeover's lease: the takeover crashed too.
        await sleep(lease + 150);
        const other = await store.claim(k, { fingerprint: 'fp-b', leaseMs: 60_000 });
        assert.equal(
          other.claimed,
          false,
          'another fingerprint took a key whose takeover reserved it for a day: a takeover must renew ' +
            'the reservation from its own claim, as it renews the lease',
        );
      },
    ),
    check(
      'keeps the reservation through extensions and drops it on release',
      async (store, key) => {
        const k = key();
        const claim = await store.claim(k, { fingerprint: 'fp-a', leaseMs: lease, reserveMs: DAY });
        assert.ok(claim.claimed, 'a claim of a free key wins (claim)');
        assert.equal(await store.extend(k, claim.token, lease), true, 'extend');
        await sleep(lease + 150);
        const other = await store.claim(k, { fingerprint: 'fp-b', leaseMs: 60_000 });
        assert.equal(other.claimed, false, 'an extension must not shorten the reservation');
        const released = key('released');
        const held = await store.claim(released, {
          fingerprint: 'fp-a',
          leaseMs: 60_000,
          reserveMs: DAY,
        });
        assert.ok(held.claimed, 'a claim of a free key wins (held)');
        assert.equal(await store.release(released, held.token), true, 'release');
        const next = await store.claim(released, { fingerprint: 'fp-b', leaseMs: 60_000 });
        assert.ok(next.claimed, 'a released key is free to any request');
      },
    ),
    check('never purges a dead lease that is still reserved', async (store, key) => {
      const k = key();
      const crashed = await store.claim(k, { fingerprint: 'fp-a', leaseMs: 50, reserveMs: DAY });
      assert.ok(crashed.claimed, 'a claim of a free key wins (crashed)');
      await sleep(200);
      if (store.purgeExpired !== undefined && store.capabilities.purge) {
        while ((await store.purgeExpired({ limit: 1000 })) > 0) {}
      }
      const other = await store.claim(k, { fingerprint: 'fp-b', leaseMs: 60_000 });
      assert.equal(other.claimed, false, 'the reservation survives a purge');
      const stats = await store.stats();
      assert.ok(stats.staleLeases >= 1, 'a reserved dead lease is a stale lease in stats');
    }),
  ];
}
