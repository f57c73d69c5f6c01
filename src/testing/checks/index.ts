/**
 * `idempotency-kit/testing/checks`: the store conformance checks as plain async functions, for any test
 * runner (`node:test`, Jest, Mocha…). Loads without Vitest, which `idempotency-kit/testing` needs for
 * `defineStoreSuite`.
 * @module
 */

export type { ClaimStormResult, CrossProcessOptions } from '../claim-storm.js';
export { runClaimStorm } from '../claim-storm.js';
export type { StoreClock } from '../clock-check.js';
export type { StoreCheck, StoreSuiteOptions } from '../store-checks.js';
export { storeConformanceChecks } from '../store-checks.js';
export type {
  TakeoverCompletion,
  TakeoverGeneration,
  TakeoverHold,
  TakeoverStormOptions,
  TakeoverStormResult,
} from '../takeover-storm.js';
export { runTakeoverStorm } from '../takeover-storm.js';
