/**
 * The conformance checks of steps (`capabilities.steps`): recorded on the held claim and fenced by its
 * token, kept across a takeover by the same request, dropped for another, on a release and with the
 * outcome.
 * @module
 */
import assert from 'node:assert/strict';
import { type CheckKit, DAY, sleep } from './check-kit.js';
import { assertBytesEqual } from './record-assertions.js';
import type { StoreCheck } from './suite-options.js';

/** The checks of steps, on a store that declares `capabilities.steps`. */
export function stepChecks({ check, lease }: CheckKit): StoreCheck[] {
  return [
    check('records steps on the held claim, fenced by its token', async (store, key) => {
      if (!store.capabilities.steps) return;
      assert.ok(
        store.saveStep && store.loadSteps,
        'capabilities.steps needs saveStep and loadSteps',
      );
      const k = key();
      const claim = await store.claim(k, { fingerprint: 'fp', leaseMs: 60_000, reserveMs: DAY });
      assert.ok(claim.claimed, 'a claim of a free key wins (claim)');
      assert.deepEqual(await store.loadSteps(k, claim.token), {}, 'no steps yet');
      const binary = Uint8Array.from({ length: 65_536 }, (_, i) => i % 256);
      assert.equal(await store.saveStep(k, claim.token, 'charge', Buffer.from('one')), true);
      assert.equal(await store.saveStep(k, claim.token, 'ship.v2:eu-1_x', binary), true);
      assert.equal(await store.saveStep(k, claim.token, 'charge', Buffer.from('two')), true);
      const steps = await store.loadSteps(k, claim.token);
      assert.ok(steps, 'the holder loads its steps');
      assert.deepEqual(Object.keys(steps).sort(), ['charge', 'ship.v2:eu-1_x']);
      assertBytesEqual(steps.charge as Uint8Array, Buffer.from('two'), 'a step saved again');
      assertBytesEqual(steps['ship.v2:eu-1_x'] as Uint8Array, binary, 'binary step');
      // The steps belong to the record, not to one write of it: an extension that rewrites the record
      // (a Redis hash set anew, a row upserted whole) must carry them.
      assert.equal(await store.extend(k, claim.token, 60_000), true, 'extend');
      assert.deepEqual(
        Object.keys((await store.loadSteps(k, claim.token)) ?? {}).sort(),
        ['charge', 'ship.v2:eu-1_x'],
        'an extension keeps the steps',
      );
      const wrong = claim.token + 1;
      assert.equal(await store.saveStep(k, wrong, 'charge', Buffer.from('x')), false, 'save');
      assert.equal(await store.loadSteps(k, wrong), undefined, 'load with a wrong token');
      assert.equal(await store.complete(k, claim.token, Buffer.from('done'), DAY), true);
      assert.equal(
        await store.saveStep(k, claim.token, 'late', Buffer.from('x')),
        false,
        'a completed record takes no steps',
      );
      assert.equal(await store.loadSteps(k, claim.token), undefined, 'nor gives any');
    }),
    check(
      'keeps steps across a takeover by the same request and drops them for another',
      async (store, key) => {
        if (!store.capabilities.steps || !store.saveStep || !store.loadSteps) return;
        const k = key();
        const crashed = await store.claim(k, { fingerprint: 'fp', leaseMs: lease, reserveMs: DAY });
        assert.ok(crashed.claimed, 'a claim of a free key wins (crashed)');
        assert.equal(await store.saveStep(k, crashed.token, 'charge', Buffer.from('ch_1')), true);
        await sleep(lease + 150);
        assert.equal(
          await store.saveStep(k, crashed.token, 'ship', Buffer.from('late')),
          false,
          'an expired holder records nothing',
        );
        assert.equal(
          await store.loadSteps(k, crashed.token),
          undefined,
          'an expired holder reads none (loadSteps is fenced by the lease, as saveStep is)',
        );
        const next = await store.claim(k, { fingerprint: 'fp', leaseMs: 60_000, reserveMs: DAY });
        assert.ok(next.claimed, 'a claim of a free key wins (next)');
        assert.equal(next.attempt, 2);
        const steps = await store.loadSteps(k, next.token);
        assert.deepEqual(Object.keys(steps ?? {}), ['charge'], 'the crashed attempt’s step');
        assertBytesEqual(steps?.charge as Uint8Array, Buffer.from('ch_1'), 'its result');
        assert.equal(
          await store.loadSteps(k, crashed.token),
          undefined,
          'the stale holder reads none',
        );

        // A dead claim that is not reserved may go to another request: it must not inherit the steps.
        const other = key('other');
        const first = await store.claim(other, { fingerprint: 'fp-a', leaseMs: lease });
        assert.ok(first.claimed, 'a claim of a free key wins (first)');
        assert.equal(await store.saveStep(other, first.token, 'charge', Buffer.from('a')), true);
        await sleep(lease + 150);
        const stranger = await store.claim(other, { fingerprint: 'fp-b', leaseMs: 60_000 });
        assert.ok(stranger.claimed, 'a claim of a free key wins (stranger)');
        assert.deepEqual(await store.loadSteps(other, stranger.token), {}, 'another request');
      },
    ),
    check(
      'keeps steps across a second takeover after the first claim’s reservation has ended',
      async (store, key) => {
        if (!store.capabilities.steps || !store.saveStep || !store.loadSteps) return;
        // Each takeover reserves the key anew, from its own claim: a later takeover must still find the
        // steps of the first attempt, even once that attempt's reservation is over. A store that kept
        // the steps only as long as the reservation of the claim that recorded them lost a crashed
        // attempt's charge after a second crash, and the third attempt charged again.
        const k = key();
        const options = { fingerprint: 'fp', leaseMs: lease, reserveMs: 3 * lease };
        const first = await store.claim(k, options);
        assert.ok(first.claimed, 'a claim of a free key wins (first)');
        assert.equal(await store.saveStep(k, first.token, 'charge', Buffer.from('ch_1')), true);
        await sleep(lease + 100);
        // The second attempt crashes before it looks at the steps (before its first step).
        const second = await store.claim(k, { ...options, reserveMs: 4 * lease });
        assert.ok(second.claimed, 'the same request takes the crashed claim over (second)');
        assert.equal(second.attempt, 2);
        // Past the first claim's reservation and the second's lease, within the second's reservation.
        await sleep(2 * lease + 100);
        const third = await store.claim(k, options);
        assert.ok(third.claimed, 'the same request takes the crashed claim over (third)');
        assert.equal(third.attempt, 3, 'the third attempt is a takeover of the same record');
        const steps = await store.loadSteps(k, third.token);
        assert.deepEqual(Object.keys(steps ?? {}), ['charge'], 'the first attempt’s step');
        assertBytesEqual(steps?.charge as Uint8Array, Buffer.from('ch_1'), 'its result');
      },
    ),
    check('drops steps when the claim is released or its outcome expires', async (store, key) => {
      if (!store.capabilities.steps || !store.saveStep || !store.loadSteps) return;
      const k = key();
      const first = await store.claim(k, { fingerprint: 'fp', leaseMs: 60_000, reserveMs: DAY });
      assert.ok(first.claimed, 'a claim of a free key wins (first)');
      assert.equal(await store.saveStep(k, first.token, 'charge', Buffer.from('x')), true);
      assert.equal(await store.release(k, first.token), true);
      const again = await store.claim(k, { fingerprint: 'fp', leaseMs: 60_000, reserveMs: DAY });
      assert.ok(again.claimed, 'a claim of a free key wins (again)');
      assert.deepEqual(await store.loadSteps(k, again.token), {}, 'after a release');
      assert.equal(await store.saveStep(k, again.token, 'charge', Buffer.from('y')), true);
      assert.equal(await store.complete(k, again.token, Buffer.from('done'), 50), true);
      await sleep(200);
      const later = await store.claim(k, { fingerprint: 'fp', leaseMs: 60_000, reserveMs: DAY });
      assert.ok(later.claimed, 'the outcome expired');
      assert.deepEqual(await store.loadSteps(k, later.token), {}, 'after the outcome expired');
    }),
  ];
}
