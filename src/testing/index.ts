/**
 * `idempotency-kit/testing`: the store conformance suite, for the stores shipped here and for third-party
 * stores. Needs `vitest` installed to load (this entry imports {@link defineStoreSuite}, which registers
 * Vitest tests); the checks themselves (`storeConformanceChecks`) are framework-free.
 * @module
 */

export type { StoreCheck, StoreSuiteOptions } from './checks.js';
export { storeConformanceChecks } from './checks.js';
export type { ClaimStormResult, CrossProcessOptions } from './claim-storm.js';
export { runClaimStorm } from './claim-storm.js';
export { defineStoreSuite } from './suite.js';
