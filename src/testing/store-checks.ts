/**
 * The store conformance checks, as plain async functions that throw on a violation. `defineStoreSuite`
 * wraps each in a test; keeping them framework-free lets a test run them against a deliberately broken
 * store and show that they fail it. This entry only assembles them: each group of checks lives in a module
 * of its own (claims, completion, leases, ...), and the order here is the order of the tests, which every
 * store's suite has always run them in.
 * @module
 */
import { batchClaimChecks } from './batch-claim-checks.js';
import { batchCompletionChecks } from './batch-completion-checks.js';
import { batchReservationChecks } from './batch-reservation-checks.js';
import { batchStepChecks } from './batch-step-checks.js';
import { createCheckKit } from './check-kit.js';
import { claimChecks } from './claim-checks.js';
import { checkStoreClock } from './clock-check.js';
import { checkClockWrites } from './clock-writes-check.js';
import { completionChecks } from './completion-checks.js';
import { crossProcessChecks } from './cross-process-checks.js';
import { deleteChecks } from './delete-checks.js';
import { inspectChecks } from './inspect-checks.js';
import { invalidDurationChecks } from './invalid-duration-checks.js';
import { leaseChecks } from './lease-checks.js';
import { checkListCrashed } from './list-crashed-check.js';
import { checkLosingClaim } from './losing-claim-check.js';
import { outcomeChecks } from './outcome-checks.js';
import { purgeChecks } from './purge-checks.js';
import { releaseChecks } from './release-checks.js';
import { reservationChecks } from './reservation-checks.js';
import { statsChecks } from './stats-checks.js';
import { stepChecks } from './step-checks.js';
import { checkSuiteOptions, type StoreCheck, type StoreSuiteOptions } from './suite-options.js';

export type { StoreCheck, StoreSuiteOptions } from './suite-options.js';

/** Build the list of conformance checks for a store. */
export function storeConformanceChecks(options: StoreSuiteOptions): StoreCheck[] {
  checkSuiteOptions(options);
  const kit = createCheckKit(options);
  const { check, lease } = kit;
  return [
    ...claimChecks(kit),
    ...completionChecks(kit),
    ...invalidDurationChecks(kit),
    ...leaseChecks(kit),
    ...releaseChecks(kit),
    ...outcomeChecks(kit, options.maxOutcomeBytes ?? 1024 * 1024),
    ...deleteChecks(kit),
    ...statsChecks(kit),
    ...reservationChecks(kit),
    ...inspectChecks(kit),
    // Checks with a module of their own, which their unit tests also run on broken stores.
    check(
      'follows the store’s clock, never the process’s (leases, retentions, tokens after a release)',
      async (store, key) => {
        await checkStoreClock(store, {
          name: options.name,
          storeClock: options.storeClock,
          key,
          lease,
        });
        if (options.storeClock === 'backend') await checkClockWrites(store, { key, lease });
      },
    ),
    check(
      'answers a losing claim with the record as it stands, never an earlier read',
      (store, key) => checkLosingClaim(store, { key, lease }),
    ),
    check(
      'listCrashed lists each crashed claim once across pages, and never a live lease, a completed record, an ended reservation or another prefix’s key',
      (store, key, prefix) =>
        checkListCrashed(store, {
          key,
          prefix,
          lease,
          createOtherStore: (otherPrefix) => options.createStore(otherPrefix),
          disposeOtherStore: (other) => options.disposeStore?.(other),
        }),
    ),
    ...purgeChecks(kit),
    ...batchClaimChecks(kit, options.roundTrips),
    ...batchCompletionChecks(kit),
    ...batchReservationChecks(kit),
    ...stepChecks(kit),
    ...batchStepChecks(kit),
    ...crossProcessChecks(kit, options.crossProcess),
  ];
}
