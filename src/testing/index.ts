/**
 * `idempotency-kit/testing`: the store conformance suite, for the stores shipped here and for third-party
 * stores. Needs `vitest` installed to load (this entry imports {@link defineStoreSuite}, which registers
 * Vitest tests); `idempotency-kit/testing/checks` has the same checks (`storeConformanceChecks`,
 * `runClaimStorm`, `runTakeoverStorm`) without Vitest, for other test runners.
 * @module
 */

export type { ClaimStormResult, CrossProcessOptions } from './claim-storm.js';
export { runClaimStorm } from './claim-storm.js';
export type { StoreClock } from './clock-check.js';
export type { StoreCheck, StoreSuiteOptions } from './store-checks.js';
export { storeConformanceChecks } from './store-checks.js';
export { defineStoreSuite } from './suite.js';
export type {
  TakeoverCompletion,
  TakeoverGeneration,
  TakeoverHold,
  TakeoverStormOptions,
  TakeoverStormResult,
} from './takeover-storm.js';
export { runTakeoverStorm } from './takeover-storm.js';
