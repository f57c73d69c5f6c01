/**
 * What an existing record means for a new attempt: `mismatch`, `in_progress` or a replay. Shared by the
 * engine and the transactional modes, so every path answers alike.
 * @module
 */
import type { RunOutcome } from './engine.js';
import { ReplayedError } from './errors.js';
import { emit, type HookEvent, type IdempotencyHooks } from './hooks.js';
import { decodeOutcome, type OutcomeCodec } from './outcome.js';
import { type IdempotencyRecord, RecordStatus } from './record.js';

/** Everything {@link settleRecord} needs besides the record. */
export interface SettleInput {
  /** Fingerprint of the new attempt. */
  fingerprint: string;
  /** Decodes a stored value. */
  codec: OutcomeCodec;
  /** Current time (epoch ms), for the remaining lease. */
  now: number;
  /** Hooks to notify. */
  hooks: IdempotencyHooks;
  /** The hook event of this attempt. */
  event: HookEvent;
  /** True when the record came from the local cache rather than the store. */
  fromCache: boolean;
  /**
   * The lease this attempt would have taken: the longest `retryAfterMs` answered. A holder's lease ends
   * within one lease of its last extension, so a longer wait only comes from clocks that disagree (this
   * process's stepped back, or behind the store's): an hour's skew made a 30 s lease's duplicate wait an
   * hour. Absent: not capped.
   */
  leaseMs?: number;
}

/**
 * Answer a new attempt from the record that blocks it. A mismatch is checked before in-progress, so misuse
 * is reported even while the first call runs.
 * @throws ReplayedError when the record holds a stored error outcome.
 */
export function settleRecord<T>(record: IdempotencyRecord, input: SettleInput): RunOutcome<T> {
  const { hooks, event } = input;
  if (record.fingerprint !== input.fingerprint) {
    emit(hooks, 'onMismatch', event);
    return { status: 'mismatch' };
  }
  if (record.status === RecordStatus.InProgress) {
    // At least 1 ms (a lease ending this very millisecond still blocks), at most one lease (see leaseMs).
    const retryAfterMs = Math.min(
      Math.max(record.leaseUntil - input.now, 1),
      input.leaseMs ?? Number.POSITIVE_INFINITY,
    );
    emit(hooks, 'onConflict', { ...event, retryAfterMs });
    return { status: 'in_progress', retryAfterMs };
  }
  // The event is only built when someone listens: this is the hot path of every replay.
  if (hooks.onReplayed !== undefined)
    emit(hooks, 'onReplayed', { ...event, fromCache: input.fromCache });
  const decoded = decodeOutcome(record.outcome);
  if (decoded.kind === 'error') throw new ReplayedError(decoded.error);
  return { status: 'replayed', value: input.codec.decode(decoded.payload) as T };
}
