/**
 * The conformance checks of `delete`: it removes a record of any status, live or dead, steps included, and
 * reports only a live one.
 * @module
 */
import assert from 'node:assert/strict';
import { type CheckKit, DAY, sleep } from './check-kit.js';
import type { StoreCheck } from './suite-options.js';

/** The checks of deletes. */
export function deleteChecks({ check, lease }: CheckKit): StoreCheck[] {
  return [
    check('deletes records of any status on request', async (store, key) => {
      const live = key('live');
      const done = key('done');
      const a = await store.claim(live, { fingerprint: 'fp', leaseMs: 60_000 });
      const b = await store.claim(done, { fingerprint: 'fp', leaseMs: 60_000 });
      assert.ok(a.claimed && b.claimed, 'a claim of a free key wins (a, b)');
      assert.equal(await store.complete(done, b.token, Buffer.from('x'), DAY), true);
      assert.equal(await store.delete(live), true);
      assert.equal(await store.delete(done), true);
      assert.equal(await store.get(live), undefined);
      assert.equal(await store.get(done), undefined);
      assert.equal(await store.delete(key('absent')), false);
    }),

    // Measured on every built-in store: `delete` reports only a live record (what `get` returns), and
    // removes a dead one all the same, reservation included; the next claim still gets a larger token.
    check(
      'deletes a dead record (expired lease, reserved or not, or expired outcome), reporting false, and frees its key',
      async (store, key) => {
        const [unreserved, reserved, expired] = [
          key('unreserved'),
          key('reserved'),
          key('expired'),
        ];
        const a = await store.claim(unreserved, { fingerprint: 'fp', leaseMs: lease });
        const b = await store.claim(reserved, {
          fingerprint: 'fp',
          leaseMs: lease,
          reserveMs: DAY,
        });
        assert.ok(a.claimed && b.claimed, 'a claim of a free key wins (a, b)');
        // The crashed claim's steps go with its record: a claim after the delete starts from nothing.
        // Saved at once, within the short lease of `b` however slow the store's round trips.
        const saveStep = store.capabilities.steps ? store.saveStep?.bind(store) : undefined;
        if (saveStep) {
          assert.equal(await saveStep(reserved, b.token, 'charge', Buffer.from('x')), true);
        }
        const c = await store.claim(expired, { fingerprint: 'fp', leaseMs: 60_000 });
        assert.ok(c.claimed, 'a claim of a free key wins (c)');
        assert.equal(await store.complete(expired, c.token, Buffer.from('x'), lease), true);
        await sleep(lease + 150);
        for (const [k, token, what] of [
          [unreserved, a.token, 'an expired lease'],
          [reserved, b.token, 'an expired lease still reserved for its request'],
          [expired, c.token, 'an expired outcome'],
        ] as const) {
          assert.equal(
            await store.delete(k),
            false,
            `delete of ${what} returns false: it reports a live record only, one \`get\` would return`,
          );
          if (store.inspect) {
            assert.equal(await store.inspect(k), undefined, `delete removed ${what}`);
          }
          const next = await store.claim(k, { fingerprint: 'fp-other', leaseMs: 60_000 });
          assert.ok(
            next.claimed,
            `after the delete of ${what}, another request's claim wins: delete removes a dead record ` +
              'too, and with it the reservation',
          );
          assert.ok(next.token > token, `after the delete of ${what}, the next token is larger`);
          if (saveStep && store.loadSteps) {
            assert.deepEqual(
              await store.loadSteps(k, next.token),
              {},
              `after the delete of ${what}, the next claim has no steps: delete removes them with the ` +
                'record',
            );
          }
        }
      },
    ),
  ];
}
