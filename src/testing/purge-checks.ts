/**
 * The conformance check of `purgeExpired`: expired records go in batches bounded by `limit`, and never a
 * live lease or a live outcome.
 * @module
 */
import assert from 'node:assert/strict';
import { type CheckKit, DAY, sleep } from './check-kit.js';
import { assertCompleted, assertInProgress } from './record-assertions.js';
import type { StoreCheck } from './suite-options.js';

/** The check of purges, on a store that declares `capabilities.purge`. */
export function purgeChecks({ check }: CheckKit): StoreCheck[] {
  return [
    check(
      'purges expired records in bounded batches and never a live lease',
      async (store, key) => {
        if (store.purgeExpired === undefined || !store.capabilities.purge) {
          assert.equal(
            store.capabilities.purge,
            false,
            'purgeExpired missing but capability claimed',
          );
          return;
        }
        const liveLease = key('live');
        const liveDone = key('done');
        const held = await store.claim(liveLease, { fingerprint: 'fp', leaseMs: 60_000 });
        const doneClaim = await store.claim(liveDone, { fingerprint: 'fp', leaseMs: 60_000 });
        assert.ok(
          held.claimed && doneClaim.claimed,
          'a claim of a free key wins (held, doneClaim)',
        );
        await store.complete(liveDone, doneClaim.token, Buffer.from('keep'), DAY);
        for (let i = 0; i < 5; i++) {
          const expiring = key(`exp${i}`);
          const c = await store.claim(expiring, { fingerprint: 'fp', leaseMs: 60_000 });
          assert.ok(c.claimed, 'a claim of a free key wins (c)');
          await store.complete(expiring, c.token, Buffer.from('old'), 50);
          await store.claim(key(`dead${i}`), { fingerprint: 'fp', leaseMs: 50 });
        }
        await sleep(200);
        const first = await store.purgeExpired({ limit: 2 });
        assert.ok(first <= 2, `limit respected (deleted ${first})`);
        let total = first;
        for (
          let n = await store.purgeExpired({ limit: 1000 });
          n > 0;
          n = await store.purgeExpired({ limit: 1000 })
        ) {
          total += n;
        }
        assert.ok(total >= 10, `expired records purged (deleted ${total})`);
        // The live lease is still held by its token, and the live outcome is still replayable.
        assertInProgress(await store.get(liveLease), 'live lease kept');
        assert.equal(await store.extend(liveLease, held.token, 60_000), true, 'holder still holds');
        assertCompleted(await store.get(liveDone), 'live outcome kept');
      },
    ),
  ];
}
