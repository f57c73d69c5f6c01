/**
 * What a key's record means to the next request with that key, for operators: why a key answers 409 or
 * 422, whether a crashed request will resume, when a replay stops. Built on the store's `inspect` (which
 * also sees a crashed claim's reserved dead lease, hidden from `get`) and judged by the store's clock.
 * @module
 */

import type { Store } from '../store/store.js';
import { type IdempotencyRecord, isRecordDead, isRecordGone, RecordStatus } from './record.js';

/** The states a key can be in, as {@link inspectKey} reports them. */
export const KeyState = {
  /** No record affects the key: the next request with it runs. */
  Absent: 'absent',
  /** An execution holds the key (its lease is live): a duplicate gets `in_progress` (HTTP 409). */
  InProgress: 'in_progress',
  /** The outcome is stored: the same request gets it replayed; another gets `mismatch` (HTTP 422). */
  Completed: 'completed',
  /**
   * The holder died (its lease ended without a completion) and the key is still reserved for its request:
   * the same request retried takes it over (resuming from its recorded steps); another gets `mismatch`
   * (HTTP 422) until `reservedUntil`.
   */
  Crashed: 'crashed',
} as const;
/** One of {@link KeyState}'s values. */
export type KeyState = (typeof KeyState)[keyof typeof KeyState];

/** A key's record, and what it means for the next request with that key. */
export interface KeyInspection {
  /** The storage key inspected. */
  storageKey: string;
  /** What the next request with the key meets. */
  state: KeyState;
  /** The record (absent for {@link KeyState.Absent}). */
  record?: IdempotencyRecord;
  /**
   * The clock the state was judged by (epoch ms): the store's own when it has `inspect`, else the local
   * one. Compare the record's times with it.
   */
  now: number;
  /**
   * How the state was read: `inspect` (the store's own, which sees crashed claims' reservations and
   * steps) or `get` (a store without `inspect`: a crashed claim's reserved key shows as absent).
   */
  source: 'inspect' | 'get';
}

/**
 * Read `storageKey`'s record from `store` and say what it means for the next request with that key (an
 * admin call: one store read, never on a request's path). Uses the store's `inspect` when it has one
 * (every built-in store), else `get` judged by `localNow`.
 * @param localNow the local clock, used only for a store without `inspect`
 * @throws StoreUnavailableError when the store cannot be read.
 * @example
 * import { inspectKey } from 'idempotency-kit';
 * // The key hash from a trace (`idempotency.key_hash`) or a log line:
 * const { state, record } = await inspectKey(store, '3f9a…');
 */
export async function inspectKey(
  store: Store,
  storageKey: string,
  localNow: () => number = Date.now,
): Promise<KeyInspection> {
  if (store.inspect !== undefined) {
    const inspection = await store.inspect(storageKey);
    if (inspection === undefined) {
      // The store said nothing is there: its clock is not in the reply, so the local one stands in.
      return { storageKey, state: KeyState.Absent, now: localNow(), source: 'inspect' };
    }
    const { record, now } = inspection;
    return { storageKey, state: stateOf(record, now), record, now, source: 'inspect' };
  }
  const record = await store.get(storageKey);
  const now = localNow();
  if (record === undefined) return { storageKey, state: KeyState.Absent, now, source: 'get' };
  return { storageKey, state: stateOf(record, now), record, now, source: 'get' };
}

/**
 * The state `record` puts its key in at `now` (store clock), by the record rules every store applies
 * (`isRecordGone`, `isRecordDead`): a dead lease that is not gone is one still reserved for its request.
 */
export function stateOf(record: IdempotencyRecord, now: number): KeyState {
  if (isRecordGone(record, now)) return KeyState.Absent;
  if (record.status === RecordStatus.Completed) return KeyState.Completed;
  return isRecordDead(record, now) ? KeyState.Crashed : KeyState.InProgress;
}
