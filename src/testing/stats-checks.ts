/**
 * The conformance check of `stats`: live, completed and stale records are counted as they change.
 * @module
 */
import assert from 'node:assert/strict';
import { type CheckKit, DAY, sleep } from './check-kit.js';
import type { StoreCheck } from './suite-options.js';

/** The check of `stats`. */
export function statsChecks({ check, lease }: CheckKit): StoreCheck[] {
  return [
    check('reports live, completed and stale records in stats', async (store, key) => {
      const started = Date.now();
      const before = await store.stats();
      // A store whose stats walk a large shared keyspace (Redis `SCAN`) takes a while: the lease that is
      // to end before the last call must still be live during the next one.
      const staleLeaseMs = Math.max(lease, 3 * (Date.now() - started) + 100);
      const live = await store.claim(key('live'), { fingerprint: 'fp', leaseMs: 60_000 });
      const stale = await store.claim(key('stale'), { fingerprint: 'fp', leaseMs: staleLeaseMs });
      const doneKey = key('done');
      const done = await store.claim(doneKey, { fingerprint: 'fp', leaseMs: 60_000 });
      assert.ok(
        live.claimed && stale.claimed && done.claimed,
        'a claim of a free key wins (live, stale, done)',
      );
      const mid = await store.stats();
      assert.equal(mid.inProgress - before.inProgress, 3, 'three live leases');
      assert.ok(mid.oldestLeaseAgeMs !== null && mid.oldestLeaseAgeMs >= 0, 'oldest lease age');
      assert.equal(await store.complete(doneKey, done.token, Buffer.from('x'), DAY), true);
      await sleep(staleLeaseMs + 150);
      const after = await store.stats();
      assert.equal(after.inProgress - before.inProgress, 1, 'one live lease left');
      assert.equal(after.completed - before.completed, 1, 'one completed');
      // A store that keeps dead leases counts it as stale; one whose lease keys vanish (Redis) cannot.
      const staleDelta = after.staleLeases - before.staleLeases;
      assert.ok(staleDelta === 0 || staleDelta === 1, `stale leases grew by ${staleDelta}`);
    }),
  ];
}
