/**
 * The conformance checks of stored outcomes: a completed record is forgotten after its retention, and an
 * outcome comes back byte-exact, empty or up to the suite's largest size.
 * @module
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { type CheckKit, DAY, sleep } from './check-kit.js';
import { assertBytesEqual, assertCompleted } from './record-assertions.js';
import type { StoreCheck } from './suite-options.js';

/** The checks of retention and of byte-exact outcomes up to `maxBytes`. */
export function outcomeChecks({ check, lease }: CheckKit, maxBytes: number): StoreCheck[] {
  return [
    check('forgets a completed record after its retention', async (store, key) => {
      const k = key();
      const claim = await store.claim(k, { fingerprint: 'fp', leaseMs: 60_000 });
      assert.ok(claim.claimed, 'a claim of a free key wins (claim)');
      assert.equal(await store.complete(k, claim.token, Buffer.from('short'), lease), true);
      assertCompleted(await store.get(k), 'before expiry');
      await sleep(lease + 150);
      assert.equal(await store.get(k), undefined, 'expired record is gone');
      const again = await store.claim(k, { fingerprint: 'fp', leaseMs: 60_000 });
      assert.ok(again.claimed, 'the key is new again');
      assert.ok(
        again.token > claim.token,
        'the key is new again: its claim gets a larger token than the expired outcome’s',
      );
    }),

    check(`round-trips binary outcomes byte-exact up to ${maxBytes} bytes`, async (store, key) => {
      const everyByte = Uint8Array.from({ length: 256 }, (_, i) => i);
      const samples = [
        new Uint8Array(0),
        Uint8Array.of(0),
        everyByte,
        randomBytes(65_536),
        randomBytes(maxBytes),
      ];
      for (const [i, outcome] of samples.entries()) {
        const k = key(`bin${i}`);
        const claim = await store.claim(k, { fingerprint: 'fp', leaseMs: 60_000 });
        assert.ok(claim.claimed, 'a claim of a free key wins (claim)');
        assert.equal(await store.complete(k, claim.token, outcome, DAY), true);
        assertBytesEqual(assertCompleted(await store.get(k), 'get').outcome, outcome, `get #${i}`);
        const replay = await store.claim(k, { fingerprint: 'fp', leaseMs: 60_000 });
        assert.equal(replay.claimed, false);
        if (!replay.claimed) {
          assertBytesEqual(assertCompleted(replay.record, 'claim').outcome, outcome, `claim #${i}`);
        }
      }
    }),
  ];
}
