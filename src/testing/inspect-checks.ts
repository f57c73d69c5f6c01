/**
 * The conformance check of `inspect`: it shows live and completed records, and a crashed claim while it
 * is reserved (which `get` hides), and changes nothing by looking.
 * @module
 */
import assert from 'node:assert/strict';
import { type CheckKit, DAY, sleep } from './check-kit.js';
import { assertBytesEqual, assertCompleted, assertInProgress } from './record-assertions.js';
import type { StoreCheck } from './suite-options.js';

/** The check of `inspect`, on a store that has it. */
export function inspectChecks({ check, lease }: CheckKit): StoreCheck[] {
  return [
    check(
      'inspect shows live and completed records, and a crashed claim while it is reserved',
      async (store, key) => {
        if (store.inspect === undefined) return;
        const skew = 60_000;
        const steps = store.capabilities.steps && store.saveStep !== undefined;
        assert.equal(await store.inspect(key('absent')), undefined, 'an absent key');

        const crashed = key('crashed');
        const unreserved = key('unreserved');
        const released = key('released');
        const done = key('done');
        const a = await store.claim(crashed, {
          fingerprint: 'fp-a',
          leaseMs: lease,
          reserveMs: DAY,
        });
        const b = await store.claim(unreserved, { fingerprint: 'fp-b', leaseMs: lease });
        const c = await store.claim(released, {
          fingerprint: 'fp-c',
          leaseMs: lease,
          reserveMs: DAY,
        });
        const d = await store.claim(done, { fingerprint: 'fp-d', leaseMs: 60_000 });
        assert.ok(
          a.claimed && b.claimed && c.claimed && d.claimed,
          'a claim of a free key wins (a, b, c, d)',
        );
        if (steps)
          assert.equal(
            await store.saveStep?.(crashed, a.token, 'charge', Buffer.from('ch_1')),
            true,
          );
        assert.equal(await store.release(released, c.token), true);
        assert.equal(await store.complete(done, d.token, Buffer.from('outcome'), DAY), true);

        const live = await store.inspect(crashed);
        assert.ok(live, 'a live claim');
        assert.ok(Math.abs(live.now - Date.now()) < skew, 'now is the store clock, in epoch ms');
        const held = assertInProgress(live.record, 'a live claim');
        assert.equal(held.token, a.token);
        assert.equal(held.fingerprint, 'fp-a');
        assert.ok(held.leaseUntil > live.now, 'its lease is live');
        assert.ok(
          (held.reservedUntil ?? 0) > held.leaseUntil,
          'its reservation reaches past its lease',
        );
        if (steps)
          assertBytesEqual(held.steps?.charge ?? new Uint8Array(), Buffer.from('ch_1'), 'its step');

        const completed = await store.inspect(done);
        assert.ok(completed, 'a completed record');
        assertBytesEqual(
          assertCompleted(completed.record, 'completed').outcome,
          Buffer.from('outcome'),
          'outcome',
        );
        assert.equal(await store.inspect(released), undefined, 'a release leaves nothing reserved');

        await sleep(lease + 150);
        assert.equal(await store.get(crashed), undefined, 'get hides the dead lease');
        const dead = await store.inspect(crashed);
        assert.ok(dead, 'inspect shows the dead lease while it is reserved');
        const record = assertInProgress(dead.record, 'the crashed claim');
        assert.equal(record.token, a.token);
        assert.ok(record.leaseUntil <= dead.now, 'its lease has ended');
        assert.ok((record.reservedUntil ?? 0) > dead.now, 'its reservation has not');
        if (steps) {
          assertBytesEqual(
            record.steps?.charge ?? new Uint8Array(),
            Buffer.from('ch_1'),
            'its step kept',
          );
        }
        assert.equal(
          await store.inspect(unreserved),
          undefined,
          'a dead, unreserved lease is gone',
        );
        // Inspecting changed nothing: the same request still takes the key over, another is refused.
        assert.equal(
          (await store.claim(crashed, { fingerprint: 'fp-b', leaseMs: 60_000 })).claimed,
          false,
        );
        const takeover = await store.claim(crashed, { fingerprint: 'fp-a', leaseMs: 60_000 });
        assert.ok(
          takeover.claimed && takeover.token > a.token,
          'the same request takes the crashed claim over, with a larger token',
        );
      },
    ),
  ];
}
