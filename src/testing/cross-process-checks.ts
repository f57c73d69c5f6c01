/**
 * The conformance checks of a store shared across processes: a storm of real OS processes claiming the
 * same keys, and one taking over their expired leases. A store that says it is shared
 * (`capabilities.crossProcess`) but is given no storm fails a check instead: the one guarantee such a
 * store exists for would otherwise go unchecked.
 * @module
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { CheckKit } from './check-kit.js';
import { runClaimStorm } from './claim-storm.js';
import type { StoreCheck, StoreSuiteOptions } from './suite-options.js';
import { checkTakeoverStorm } from './takeover-storm-check.js';

/**
 * The cross-process checks of the suite's `crossProcess` option: the storms when it is given, nothing
 * when it is `false`, and the check that the store does not need them when it is left out.
 */
export function crossProcessChecks(
  { check }: CheckKit,
  crossProcess: StoreSuiteOptions['crossProcess'],
): StoreCheck[] {
  const checks: StoreCheck[] = [];
  if (crossProcess === undefined) {
    checks.push(
      check(
        'is given a cross-process storm when it says it is shared across processes',
        async (store) => {
          assert.ok(
            !store.capabilities.crossProcess,
            `store '${store.name}' says it can be shared by several processes (capabilities.crossProcess), ` +
              'which only a storm of real processes can check: pass `crossProcess` (a module that builds the ' +
              'store in each process), or `crossProcess: false` to skip it knowingly',
          );
        },
      ),
    );
  } else if (crossProcess !== false) {
    const cp = crossProcess;
    checks.push({
      name: `gives exactly one winner per key across ${cp.processes ?? 4} OS processes`,
      async run() {
        const prefix = `storm:${process.pid}:${randomUUID().slice(0, 8)}:`;
        const keyCount = cp.keys ?? 200;
        const keys = Array.from({ length: keyCount }, (_, i) => `${prefix}${i}`);
        const result = await runClaimStorm(cp, keys);
        assert.deepEqual(result.errors, [], 'no claim failed');
        assert.equal(result.totalClaims, (cp.processes ?? 4) * (cp.claimsPerProcess ?? 2000));
        const wrong = [...result.winnersByKey].filter(([, wins]) => wins !== 1);
        assert.deepEqual(wrong, [], 'every key has exactly one winner');
        assert.equal(result.winnersByKey.size, keyCount);
      },
    });
    if (cp.takeovers !== false) {
      checks.push({
        name: `gives exactly one winner per takeover of expired leases across ${cp.processes ?? 4} OS processes, with growing tokens, fencing the crashed holders`,
        run: () => checkTakeoverStorm(cp, `takeover:${process.pid}:${randomUUID().slice(0, 8)}:`),
      });
    }
  }

  return checks;
}
