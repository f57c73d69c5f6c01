/**
 * The conformance check of steps through batched takeovers: `claimMany` and `completeAndClaimMany` carry a
 * crashed claim's steps to a takeover by the same request and drop them for another, as `claim` does.
 * Under load the engine claims through the batch calls, so a batch statement or script that is a second
 * copy of the claim's, and forgot the steps, loses a crashed attempt's charge (the next attempt charges
 * again) or hands it to another request.
 * @module
 */
import assert from 'node:assert/strict';
import type { ClaimResult } from '../core/record.js';
import type { ClaimRequest, Store } from '../store/store.js';
import { type CheckKit, DAY, sleep } from './check-kit.js';
import { assertBytesEqual } from './record-assertions.js';
import type { StoreCheck } from './suite-options.js';

/** A batch path that claims: `claimMany`, or the claims of `completeAndClaimMany`. */
type BatchClaim = (requests: ClaimRequest[]) => Promise<ClaimResult[]>;

/** The batch paths of `store` that claim, by name. */
function batchClaims(store: Store): Array<[string, BatchClaim]> {
  const paths: Array<[string, BatchClaim]> = [];
  // `claimMany` only where the store says it batches (the contract's rule, as the other batch checks read
  // it: a store may keep the method for single calls, Redis Cluster does).
  const claimMany = store.capabilities.batch ? store.claimMany?.bind(store) : undefined;
  const completeAndClaimMany = store.completeAndClaimMany?.bind(store);
  if (claimMany) paths.push(['claimMany', claimMany]);
  if (completeAndClaimMany) {
    paths.push([
      'completeAndClaimMany',
      async (requests) => (await completeAndClaimMany([], requests)).claimed,
    ]);
  }
  return paths;
}

/** The check of steps through batched takeovers, on a store with `capabilities.steps` and batch calls. */
export function batchStepChecks({ check, lease }: CheckKit): StoreCheck[] {
  return [
    check(
      'keeps steps across a batched takeover by the same request and drops them for another',
      async (store, key) => {
        if (!store.capabilities.steps || !store.saveStep || !store.loadSteps) return;
        const saveStep = store.saveStep.bind(store);
        const loadSteps = store.loadSteps.bind(store);
        const paths = batchClaims(store);
        if (paths.length === 0) return;
        // A crashed claim with a step per key: reserved for the same request's takeover, unreserved for
        // the other request's.
        const keys = new Map<string, [same: string, other: string]>();
        for (const [path] of paths) {
          const [same, other] = [key(`${path}-same`), key(`${path}-other`)];
          keys.set(path, [same, other]);
          for (const k of [same, other]) {
            const reserveMs = k === same ? DAY : 0;
            const claim = await store.claim(k, { fingerprint: 'fp', leaseMs: lease, reserveMs });
            assert.ok(claim.claimed, 'a claim of a free key wins (crashed)');
            const saved = await saveStep(k, claim.token, 'charge', Buffer.from('ch_1'));
            assert.equal(saved, true, 'the holder records a step');
          }
        }
        await sleep(lease + 150);
        for (const [path, claimBatch] of paths) {
          const [same, other] = keys.get(path)!;
          const [rs, ro] = await claimBatch([
            { key: same, fingerprint: 'fp', leaseMs: 60_000, reserveMs: DAY },
            { key: other, fingerprint: 'fp-other', leaseMs: 60_000 },
          ]);
          assert.ok(rs?.claimed, `${path}: the same request takes its crashed claim over`);
          assert.ok(ro?.claimed, `${path}: another request takes an unreserved dead claim over`);
          const steps = await loadSteps(same, rs.token);
          assert.deepEqual(
            Object.keys(steps ?? {}),
            ['charge'],
            `${path}: a takeover by the same request keeps the crashed attempt’s step`,
          );
          assertBytesEqual(steps?.charge as Uint8Array, Buffer.from('ch_1'), `${path}: its result`);
          assert.deepEqual(
            await loadSteps(other, ro.token),
            {},
            `${path}: a takeover by another request starts with no steps`,
          );
          assert.equal(
            (await store.get(other))?.fingerprint,
            'fp-other',
            `${path}: a takeover by another request records its fingerprint`,
          );
        }
      },
    ),
  ];
}
