/**
 * `idempotency-kit`: the engine, the store contract, the memory store, errors and helpers. Imports no peer
 * library; stores and adapters live in their own subpaths (`idempotency-kit/sqlite`, …).
 * @module
 */
export type { Clock } from './core/clock.js';
export { systemClock } from './core/clock.js';
export type { CrashedKeysPage, ListCrashedKeysOptions } from './core/crashed-keys.js';
export { listCrashedKeys } from './core/crashed-keys.js';
export type { Duration, DurationUnit } from './core/duration.js';
export { MAX_DURATION_MS, toMs } from './core/duration.js';
export type {
  Idempotency,
  IdempotencyOptions,
  RunContext,
  RunOutcome,
  RunRequest,
  StorageKeyOptions,
  StoreErrorsPolicy,
} from './core/engine.js';
export { createIdempotency } from './core/engine.js';
export type { StoredErrorInfo } from './core/errors.js';
export {
  ERRORS_DOC_URL,
  ErrorCode,
  IdempotencyError,
  InvalidKeyError,
  InvalidOptionsError,
  isIdempotencyError,
  isInvalidKeyError,
  isInvalidOptionsError,
  isLeaseLostError,
  isOutcomeEncodingError,
  isReplayedError,
  isReplicationShortError,
  isStoreUnavailableError,
  LeaseLostError,
  OutcomeEncodingError,
  ReplayedError,
  ReplicationShortError,
  StoreUnavailableError,
} from './core/errors.js';
export type { FingerprintInput } from './core/fingerprint.js';
export { createFingerprint } from './core/fingerprint.js';
export type {
  HookEvent,
  IdempotencyHooks,
  ReplicationShortHookEvent,
  StepHookEvent,
} from './core/hooks.js';
export { combineHooks, RunOutcomeName } from './core/hooks.js';
export type { KeyInspection } from './core/inspection.js';
export { inspectKey, KeyState } from './core/inspection.js';
export { deriveDownstreamKey, MAX_KEY_LENGTH, storageKey, validateKey } from './core/key.js';
export type { OutcomeCodec } from './core/outcome.js';
export { defaultCodec } from './core/outcome.js';
export type {
  ClaimResult,
  CompletedRecord,
  IdempotencyRecord,
  InProgressRecord,
} from './core/record.js';
export {
  applyClaim,
  applyComplete,
  applyExtend,
  applyRelease,
  applySaveStep,
  isHeldBy,
  isRecordDead,
  isRecordGone,
  isReservedFor,
  nextToken,
  RecordStatus,
  reservationMs,
  stepsHeldBy,
} from './core/record.js';
export type { StepContext, StepOptions } from './core/steps.js';
export { assertStepName } from './core/steps.js';
export {
  assertBatchDurations,
  assertClaimDurations,
  assertPositiveMs,
  assertReserveMs,
} from './store/durations.js';
export type { StoreHealth, StoreHealthOptions } from './store/health.js';
export { checkStoreHealth, HEALTH_PROBE_KEY } from './store/health.js';
export type { MemoryStore, MemoryStoreOptions } from './store/memory-store.js';
export { memoryStore } from './store/memory-store.js';
export type {
  BatchWindow,
  ClaimOptions,
  ClaimRequest,
  CompleteAndClaimResults,
  CompleteRequest,
  CrashedRecordInspection,
  CrashedRecordsPage,
  ListCrashedOptions,
  PurgeOptions,
  RecordInspection,
  Store,
  StoreCapabilities,
  StoreStats,
} from './store/store.js';
