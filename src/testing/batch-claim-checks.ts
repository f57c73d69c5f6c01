/**
 * The conformance checks of `claimMany`: a batch claims as sequential claims would, in one round trip
 * when the suite can count them, and concurrent batches have one winner per key.
 * @module
 */
import assert from 'node:assert/strict';
import type { CheckKit } from './check-kit.js';
import { assertInProgress } from './record-assertions.js';
import { checkBatchRoundTrips } from './round-trip-check.js';
import type { StoreCheck, StoreSuiteOptions } from './suite-options.js';

/**
 * The checks of batched claims, on a store that declares `capabilities.batch`; the round-trip check only
 * with a `roundTrips` counter, since nothing a store returns tells how many requests it sent.
 */
export function batchClaimChecks(
  { check }: CheckKit,
  roundTrips: StoreSuiteOptions['roundTrips'],
): StoreCheck[] {
  return [
    check('claims a batch exactly as sequential claims would', async (store, key) => {
      if (!store.capabilities.batch) return;
      assert.ok(
        store.claimMany && store.completeMany,
        'capabilities.batch needs claimMany and completeMany',
      );
      const [a, b, live] = [key('a'), key('b'), key('live')];
      const held = await store.claim(live, { fingerprint: 'fp-live', leaseMs: 60_000 });
      assert.ok(held.claimed, 'a claim of a free key wins (held)');
      const results = await store.claimMany([
        { key: a, fingerprint: 'fp-a', leaseMs: 60_000 },
        { key: b, fingerprint: 'fp-b', leaseMs: 60_000 },
        { key: a, fingerprint: 'fp-other', leaseMs: 60_000 },
        { key: live, fingerprint: 'fp-x', leaseMs: 60_000 },
      ]);
      assert.equal(results.length, 4, 'one result per item, in order');
      const [ra, rb, ra2, rlive] = results;
      assert.ok(ra?.claimed && rb?.claimed, 'absent keys are claimed');
      assert.ok(ra2 && !ra2.claimed, 'the repeated key sees the first item of the batch');
      if (ra2 && !ra2.claimed) {
        assert.equal(assertInProgress(ra2.record, 'repeat').fingerprint, 'fp-a');
        assert.equal(ra2.record.token, ra.token);
      }
      assert.ok(rlive && !rlive.claimed, 'a live claim is not taken');
      if (rlive && !rlive.claimed) assert.equal(rlive.record.token, held.token);
      assert.equal(assertInProgress(await store.get(b), 'b').token, rb.token);
    }),

    ...(roundTrips === undefined
      ? []
      : [
          check('sends each batch call as one round trip (capabilities.batch)', (store, key) =>
            checkBatchRoundTrips(store, { key, roundTrips }),
          ),
        ]),

    check('gives exactly one winner per key among concurrent batches', async (store, key) => {
      if (!store.capabilities.batch || !store.claimMany) return;
      const keys = Array.from({ length: 30 }, (_, i) => key(`batch${i}`));
      const batches = Array.from({ length: 8 }, (_, b) =>
        keys.map((_, i) => keys[(i * 7 + b * 11) % keys.length]!),
      );
      const results = await Promise.all(
        batches.map((batch) =>
          store.claimMany!(batch.map((k) => ({ key: k, fingerprint: 'fp', leaseMs: 60_000 }))),
        ),
      );
      const wins = new Map<string, number>();
      for (const [b, batch] of batches.entries()) {
        for (const [i, k] of batch.entries()) {
          if (results[b]?.[i]?.claimed) wins.set(k, (wins.get(k) ?? 0) + 1);
        }
      }
      for (const k of keys) assert.equal(wins.get(k), 1, `exactly one winner for ${k}`);
    }),
  ];
}
