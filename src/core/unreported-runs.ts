/**
 * Runs the library makes for its own records (a consumer's record of a dead letter before it is written,
 * of a delivery handed back without running, and the lookup of either), told apart from the application's
 * runs so that the engine's hooks do not report them as the application's.
 *
 * Why: a consumer makes these runs through the application's engine, whose hooks are the application's
 * observers. Reported, a dead-lettered message counted as a failed run and an executed one in
 * `idempotency_runs_total` (the record's "execution"), each hand-back as an executed run, each lookup as a
 * replay; and `openTelemetryHooks` overwrote the delivery span's `idempotency.outcome` and
 * `idempotency.key_hash` with the record's. Their store failures are still reported (`onStoreError`,
 * `onReplicationShort`): they are the store's health, which those hooks count, whoever made the call.
 * @module
 */
import type { IdempotencyHooks } from './hooks.js';

/**
 * Set (to `true`) on a run request the library makes for its own records. A symbol, registered so that
 * two copies of the package agree (a consumer of one copy, an engine of another): no public option.
 */
export const UNREPORTED_RUN: unique symbol = Symbol.for('idempotency-kit.unreported-run');

/** A run request that may carry {@link UNREPORTED_RUN}. */
export interface MaybeUnreported {
  [UNREPORTED_RUN]?: true;
}

/** Whether `request` is one of the library's own runs. */
export function isUnreportedRun(request: object): boolean {
  return (request as MaybeUnreported)[UNREPORTED_RUN] === true;
}

/**
 * The hooks an unreported run calls: only those about the store (a failed call, a write short of its
 * replicas), each called as a method of `hooks`, as the engine calls them.
 */
export function storeHooksOf(hooks: IdempotencyHooks): IdempotencyHooks {
  const only: IdempotencyHooks = {};
  const { onStoreError, onReplicationShort } = hooks;
  if (onStoreError !== undefined) only.onStoreError = (event) => onStoreError.call(hooks, event);
  if (onReplicationShort !== undefined) {
    only.onReplicationShort = (event) => onReplicationShort.call(hooks, event);
  }
  return only;
}
