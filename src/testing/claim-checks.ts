/**
 * The conformance checks of single claims: what a claim of an absent key returns and stores, what a
 * losing claim is told, and that concurrent claims, of a free key or of a dead record, have one winner.
 * @module
 */
import assert from 'node:assert/strict';
import { type CheckKit, sleep } from './check-kit.js';
import { assertInProgress } from './record-assertions.js';
import type { StoreCheck } from './suite-options.js';

/** The checks of single claims and of their races. */
export function claimChecks({ check, lease }: CheckKit): StoreCheck[] {
  return [
    check(
      'claims an absent key with a positive integer token and attempt 1',
      async (store, key) => {
        const k = key();
        const result = await store.claim(k, { fingerprint: 'fp-a', leaseMs: 60_000 });
        assert.ok(result.claimed, 'first claim must win');
        assert.ok(
          Number.isSafeInteger(result.token) && result.token > 0,
          'token is a positive integer',
        );
        assert.equal(result.attempt, 1);
        const record = assertInProgress(await store.get(k), 'get after claim');
        assert.equal(record.token, result.token);
        assert.equal(record.fingerprint, 'fp-a');
        assert.equal(record.attempt, 1);
      },
    ),

    check(
      'returns the live in-progress record, with its fingerprint, to a second claim',
      async (store, key) => {
        const k = key();
        const first = await store.claim(k, { fingerprint: 'fp-a', leaseMs: 60_000 });
        assert.ok(first.claimed, 'a claim of a free key wins (first)');
        const second = await store.claim(k, { fingerprint: 'fp-other', leaseMs: 60_000 });
        assert.equal(second.claimed, false, 'a live claim must not be taken');
        if (second.claimed) return;
        const record = assertInProgress(second.record, 'blocking record');
        // The first fingerprint is visible while in flight, so a mismatch is reported, not a conflict.
        assert.equal(record.fingerprint, 'fp-a');
        assert.equal(record.token, first.token);
        assert.ok(record.leaseUntil > Date.now() + 30_000, 'leaseUntil is in the future');
      },
    ),

    check('gives exactly one winner among 50 concurrent claims on one key', async (store, key) => {
      const k = key();
      const results = await Promise.all(
        Array.from({ length: 50 }, () => store.claim(k, { fingerprint: 'fp', leaseMs: 60_000 })),
      );
      assert.equal(results.filter((r) => r.claimed).length, 1, 'exactly one winner');
    }),

    check(
      'gives exactly one winner per key among interleaved concurrent claims',
      async (store, key) => {
        const keys = Array.from({ length: 20 }, (_, i) => key(`multi${i}`));
        const attempts = keys.flatMap((k) => Array.from({ length: 10 }, () => k));
        const results = await Promise.all(
          attempts.map(async (k) => ({
            k,
            r: await store.claim(k, { fingerprint: 'fp', leaseMs: 60_000 }),
          })),
        );
        for (const k of keys) {
          const wins = results.filter((x) => x.k === k && x.r.claimed).length;
          assert.equal(wins, 1, `exactly one winner for ${k}`);
        }
      },
    ),

    // The claim of an absent key and the takeover of a dead record are often two code paths (an INSERT
    // that conflicts, and an UPDATE of the dead row): the race of the second is the one left unchecked.
    check(
      'gives exactly one winner among concurrent takeovers of an expired lease or outcome',
      async (store, key) => {
        const dead = key('dead');
        const expired = key('expired');
        const crashed = await store.claim(dead, { fingerprint: 'fp', leaseMs: lease });
        const done = await store.claim(expired, { fingerprint: 'fp', leaseMs: 60_000 });
        assert.ok(crashed.claimed && done.claimed, 'a claim of a free key wins (crashed, done)');
        assert.equal(await store.complete(expired, done.token, Buffer.from('x'), lease), true);
        await sleep(lease + 150);
        for (const [k, what] of [
          [dead, 'an expired lease'],
          [expired, 'an expired outcome'],
        ] as const) {
          const results = await Promise.all(
            Array.from({ length: 20 }, () =>
              store.claim(k, { fingerprint: 'fp', leaseMs: 60_000 }),
            ),
          );
          assert.equal(
            results.filter((r) => r.claimed).length,
            1,
            `exactly one winner among 20 concurrent takeovers of ${what}: take a dead record over ` +
              'as atomically as an absent key (one statement or script), never by reading it and then writing',
          );
        }
      },
    ),
  ];
}
