/**
 * Mistakes a store passed the conformance suite with, each a way to execute a request twice, lose its
 * steps or its outcome, or fence a stale holder in: the suite must now fail each one, in the check that
 * names the rule it breaks, and still pass the memory store and the same store without the mistake.
 */
import { describe, expect, it } from 'vitest';
import { memoryStore, type Store } from '../../../src/index.js';
import { type StoreCheck, storeConformanceChecks } from '../../../src/testing/index.js';
import { type ContractGapFaults, contractGapStore } from '../../helpers/contract-gap-store.js';

const CHECKS = {
  steps: 'records steps on the held claim, fenced by its token',
  takeoverSteps: 'keeps steps across a takeover by the same request and drops them for another',
  batchSteps: 'keeps steps across a batched takeover by the same request',
  renewed: 'renews the reservation on a takeover',
  batchReservations: 'applies reservations in batches as single claims do',
  completeAndClaim: 'completes, then claims, in one call as separate calls would',
  completeMany: 'completes a batch with per-item fencing',
  fencing: 'fences out complete, extend and release with a wrong token',
  retention: 'keeps a completed record for its whole retention',
  clock: 'follows the store’s clock, never the process’s',
  freed: 'frees a crashed claim’s key for any request once its reservation ends',
  deleted: 'deletes a dead record',
  released: 'releases the holder’s claim so the next claim wins with a larger token',
} as const;

/** The check named like `CHECKS[name]`, on stores from `createStore` (judged by a backend's clock). */
function checkNamed(name: keyof typeof CHECKS, createStore: () => Store): StoreCheck {
  const check = storeConformanceChecks({
    name: 'contract-gap',
    createStore,
    storeClock: 'backend',
  }).find((c) => c.name.startsWith(CHECKS[name]));
  if (check === undefined) throw new Error(`no check named like '${CHECKS[name]}'`);
  return check;
}

const cases: Array<[keyof ContractGapFaults, keyof typeof CHECKS, RegExp]> = [
  ['loadStepsIgnoresLease', 'takeoverSteps', /an expired holder reads none/],
  ['extendDropsSteps', 'steps', /an extension keeps the steps/],
  ['batchTakeoverDropsSteps', 'batchSteps', /claimMany: a takeover by the same request keeps/],
  [
    'batchTakeoverKeepsStepsOfAnotherRequest',
    'batchSteps',
    /claimMany: a takeover by another request starts with no steps/,
  ],
  ['takeoverKeepsReservation', 'renewed', /a takeover must renew the reservation/],
  ['batchTakeoverKeepsToken', 'batchReservations', /claimMany: a takeover got token/],
  ['completeAndClaimManyLosesClaims', 'completeAndClaim', /completeAndClaimMany stored the claim/],
  [
    'completeAndClaimManyLosesCompletions',
    'completeAndClaim',
    /completeAndClaimMany stored the completion/,
  ],
  ['completeResendIgnoresToken', 'fencing', /complete of a completed record by another token/],
  ['completeManyMatchesAnyToken', 'completeMany', /not by any token of the batch/],
  ['claimJudgesCompletedByLease', 'retention', /a completed record was claimed once/],
  ['extendWritesProcessClock', 'clock', /a lease extended by a minute .* was taken over/],
  ['completeWritesProcessClock', 'clock', /an outcome kept for a minute, completed .* was gone/],
  ['claimReservesByProcessClock', 'clock', /a key reserved for a minute .* went to another/],
  ['takeoverKeepsFingerprint', 'freed', /a takeover by another request records its fingerprint/],
  ['deleteKeepsSteps', 'deleted', /the next claim has no steps: delete removes them/],
  // The check's first release caught it only when the re-claim fell in the same millisecond.
  [
    'tokensFromClockAlone',
    'released',
    /a claim right after a release got token|a zombie of the first claim can never match/,
  ],
];

describe('the store conformance suite, on mistakes it used to pass', () => {
  for (const [fault, check, message] of cases) {
    it(`fails a store with ${fault}`, async () => {
      await expect(
        checkNamed(check, () => contractGapStore({ [fault]: true })).run(),
      ).rejects.toThrow(message);
    });
  }

  it('passes the memory store, and the same store with no mistake put in', async () => {
    const names = Object.keys(CHECKS) as Array<keyof typeof CHECKS>;
    await Promise.all(
      names.flatMap((name) => [
        checkNamed(name, () => contractGapStore()).run(),
        // The memory store judges time by the process's clock: the clock check is not its to pass here.
        ...(name === 'clock' ? [] : [checkNamed(name, () => memoryStore()).run()]),
      ]),
    );
  });
});
