/**
 * A hand-written store (the reference transitions of `record.ts` over a `Map`, judged by a clock the
 * suite's clock check cannot move, as a database server's) into which one mistake at a time is put: each
 * one a store passed the conformance suite with before the suite checked for it, and each one a way to
 * execute a request twice, to lose its recorded steps or its outcome, or to fence a stale holder in.
 * Without a fault it keeps the contract.
 */
import {
  applyClaim,
  applyComplete,
  applyExtend,
  applyRelease,
  applySaveStep,
  assertBatchDurations,
  assertClaimDurations,
  assertPositiveMs,
  type ClaimOptions,
  type ClaimRequest,
  type ClaimResult,
  type CompleteRequest,
  type IdempotencyRecord,
  type InProgressRecord,
  isRecordDead,
  isRecordGone,
  reservationMs,
  type Store,
  stepsHeldBy,
} from '../../src/index.js';

/** The mistakes that can be put in, one per flag. */
export interface ContractGapFaults {
  /** `loadSteps` checks the token but not the lease: an expired holder still reads the steps. */
  loadStepsIgnoresLease?: boolean;
  /** `extend` rewrites the record without its steps (a hash set anew, a row upserted whole). */
  extendDropsSteps?: boolean;
  /** A takeover keeps the first claim's `reserved_until` instead of reserving the key anew. */
  takeoverKeepsReservation?: boolean;
  /** The batch calls' takeover (a second copy of the claim's script) forgets the steps. */
  batchTakeoverDropsSteps?: boolean;
  /** The batch calls' takeover carries the steps whatever the fingerprint. */
  batchTakeoverKeepsStepsOfAnotherRequest?: boolean;
  /** The batch calls' takeover keeps the crashed holder's token. */
  batchTakeoverKeepsToken?: boolean;
  /** `completeAndClaimMany` answers its claims but never stores them. */
  completeAndClaimManyLosesClaims?: boolean;
  /** `completeAndClaimMany` answers its completions but never stores them. */
  completeAndClaimManyLosesCompletions?: boolean;
  /** `complete` of a completed record reports success whatever the token (a resend rule without it). */
  completeResendIgnoresToken?: boolean;
  /** `completeMany` fences by any token of the batch (`key = ANY($1) AND token = ANY($2)`). */
  completeManyMatchesAnyToken?: boolean;
  /** A claim judges a record by its lease column whatever its status: a completed key is claimable. */
  claimJudgesCompletedByLease?: boolean;
  /** `extend` writes `lease_until` from the process's clock (it compares with the backend's). */
  extendWritesProcessClock?: boolean;
  /** `complete` writes `expires_at` from the process's clock. */
  completeWritesProcessClock?: boolean;
  /** `claim` writes `reserved_until` from the process's clock. */
  claimReservesByProcessClock?: boolean;
  /** A takeover by another request keeps the crashed request's fingerprint (an upsert that forgot it). */
  takeoverKeepsFingerprint?: boolean;
  /** `delete` leaves the record's steps behind (a steps hash of their own), for the next claim to find. */
  deleteKeepsSteps?: boolean;
  /** Tokens from the backend's clock alone (its milliseconds × 1000), with no counter behind them. */
  tokensFromClockAlone?: boolean;
}

// The backend's clock: the suite's clock check moves `Date`, never this.
const backendNow = () => Math.floor(performance.timeOrigin + performance.now());

/** A store with the given faults (none: a correct store). */
export function contractGapStore(faults: ContractGapFaults = {}): Store {
  const records = new Map<string, IdempotencyRecord>();
  // The lease column a SQL row keeps after its completion (for `claimJudgesCompletedByLease`).
  const leaseColumn = new Map<string, number>();
  let lastToken = 0;
  // Steps a `delete` left behind (for `deleteKeepsSteps`), which a claim of the absent key then finds.
  const leftSteps = new Map<string, Readonly<Record<string, Uint8Array>>>();

  const write = (key: string, next: IdempotencyRecord | undefined) => {
    if (next === undefined) records.delete(key);
    else records.set(key, next);
  };

  function claimOf(
    current: IdempotencyRecord | undefined,
    key: string,
    options: ClaimOptions,
    batch: boolean,
  ): { result: ClaimResult; next: IdempotencyRecord | undefined } {
    const now = backendNow();
    const seen =
      faults.claimJudgesCompletedByLease &&
      current?.status === 'completed' &&
      (leaseColumn.get(key) ?? Number.POSITIVE_INFINITY) <= now
        ? undefined
        : current;
    const minToken = faults.tokensFromClockAlone ? 0 : lastToken + 1;
    const { result, next } = applyClaim(seen, { ...options, now, minToken });
    if (!result.claimed) return { result, next: current };
    const record = next as InProgressRecord;
    const left = seen === undefined ? leftSteps.get(key) : undefined;
    if (left !== undefined) record.steps = left;
    if (seen?.status === 'in_progress') {
      if (faults.takeoverKeepsFingerprint) record.fingerprint = seen.fingerprint;
      if (faults.takeoverKeepsReservation && seen.reservedUntil !== undefined) {
        record.reservedUntil = seen.reservedUntil;
      }
      if (batch && faults.batchTakeoverDropsSteps) delete record.steps;
      if (batch && faults.batchTakeoverKeepsStepsOfAnotherRequest && seen.steps) {
        record.steps = seen.steps;
      }
      if (batch && faults.batchTakeoverKeepsToken) {
        record.token = seen.token;
        result.token = seen.token;
      }
    }
    if (faults.claimReservesByProcessClock && record.reservedUntil !== undefined) {
      record.reservedUntil = Date.now() + reservationMs(options);
    }
    lastToken = Math.max(lastToken, result.token);
    leaseColumn.set(key, record.leaseUntil);
    return { result, next: record };
  }

  function completeOf(
    current: IdempotencyRecord | undefined,
    request: CompleteRequest,
    batchTokens: readonly number[],
  ): { ok: boolean; next: IdempotencyRecord | undefined } {
    const now = backendNow();
    if (
      faults.completeResendIgnoresToken &&
      current?.status === 'completed' &&
      current.expiresAt > now
    ) {
      return { ok: true, next: current };
    }
    const token =
      faults.completeManyMatchesAnyToken &&
      current?.status === 'in_progress' &&
      batchTokens.includes(current.token)
        ? current.token
        : request.token;
    const { retentionMs } = request;
    const outcome = Uint8Array.from(request.outcome);
    const applied = applyComplete(current, { token, outcome, retentionMs, now });
    const next = applied.next;
    if (faults.completeWritesProcessClock && next !== current && next?.status === 'completed') {
      return { ok: true, next: { ...next, expiresAt: Date.now() + retentionMs } };
    }
    return applied;
  }

  /** Completions, then claims, each item seeing the earlier ones; `store` says which are stored. */
  function batch(
    completes: readonly CompleteRequest[],
    claims: readonly ClaimRequest[],
    store: { completions: boolean; claims: boolean },
  ) {
    const seen = new Map<string, IdempotencyRecord | undefined>();
    const current = (key: string) => (seen.has(key) ? seen.get(key) : records.get(key));
    const tokens = completes.map((request) => request.token);
    const completed = completes.map((request) => {
      const { ok, next } = completeOf(current(request.key), request, tokens);
      if (ok) seen.set(request.key, next);
      if (ok && store.completions) write(request.key, next);
      return ok;
    });
    const claimed = claims.map(({ key, ...options }) => {
      const { result, next } = claimOf(current(key), key, options, true);
      if (result.claimed) seen.set(key, next);
      if (result.claimed && store.claims) write(key, next);
      return result;
    });
    return { completed, claimed };
  }

  const live = (key: string) => {
    const record = records.get(key);
    return record === undefined || isRecordDead(record, backendNow()) ? undefined : record;
  };

  return {
    name: 'contract-gap',
    capabilities: { crossProcess: false, purge: true, batch: true, steps: true },
    async claim(key, options) {
      assertClaimDurations(options, 'contract-gap');
      const { result, next } = claimOf(records.get(key), key, options, false);
      if (result.claimed) write(key, next);
      return result;
    },
    async claimMany(requests) {
      assertBatchDurations(requests, [], 'contract-gap');
      return batch([], requests, { completions: true, claims: true }).claimed;
    },
    async complete(key, token, outcome, retentionMs) {
      assertPositiveMs(retentionMs, 'retentionMs', 'contract-gap');
      const { ok, next } = completeOf(records.get(key), { key, token, outcome, retentionMs }, []);
      if (ok) write(key, next);
      return ok;
    },
    async completeMany(requests) {
      assertBatchDurations([], requests, 'contract-gap');
      return batch(requests, [], { completions: true, claims: true }).completed;
    },
    async completeAndClaimMany(completes, claims) {
      assertBatchDurations(claims, completes, 'contract-gap');
      return batch(completes, claims, {
        completions: !faults.completeAndClaimManyLosesCompletions,
        claims: !faults.completeAndClaimManyLosesClaims,
      });
    },
    async release(key, token) {
      const { ok, next } = applyRelease(records.get(key), { token, now: backendNow() });
      if (ok) write(key, next);
      return ok;
    },
    async extend(key, token, leaseMs) {
      assertPositiveMs(leaseMs, 'leaseMs', 'contract-gap');
      const { ok, next } = applyExtend(records.get(key), { token, leaseMs, now: backendNow() });
      if (!ok || next?.status !== 'in_progress') return ok;
      const record = { ...next };
      if (faults.extendWritesProcessClock) record.leaseUntil = Date.now() + leaseMs;
      if (faults.extendDropsSteps) delete record.steps;
      leaseColumn.set(key, record.leaseUntil);
      write(key, record);
      return true;
    },
    async saveStep(key, token, name, value) {
      const input = { token, name, value: Uint8Array.from(value), now: backendNow() };
      const { ok, next } = applySaveStep(records.get(key), input);
      if (ok) write(key, next);
      return ok;
    },
    async loadSteps(key, token) {
      const current = records.get(key);
      const now =
        faults.loadStepsIgnoresLease && current?.status === 'in_progress' && current.token === token
          ? current.leaseUntil - 1
          : backendNow();
      const steps = stepsHeldBy(current, token, now);
      return steps === undefined ? undefined : { ...steps };
    },
    async get(key) {
      const record = live(key);
      return record === undefined ? undefined : { ...record };
    },
    async delete(key) {
      const existed = live(key) !== undefined;
      const record = records.get(key);
      if (faults.deleteKeepsSteps && record?.status === 'in_progress' && record.steps) {
        leftSteps.set(key, record.steps);
      }
      records.delete(key);
      return existed;
    },
    async purgeExpired(options = {}) {
      const limit = options.limit ?? 1000;
      const now = backendNow();
      let removed = 0;
      for (const [key, record] of records) {
        if (removed >= limit) break;
        if (isRecordGone(record, now)) {
          records.delete(key);
          removed++;
        }
      }
      return removed;
    },
    async stats() {
      const now = backendNow();
      const stats = {
        inProgress: 0,
        completed: 0,
        staleLeases: 0,
        oldestLeaseAgeMs: null as null | number,
      };
      for (const record of records.values()) {
        if (record.status === 'completed') {
          if (record.expiresAt > now) stats.completed++;
        } else if (record.leaseUntil <= now) {
          stats.staleLeases++;
        } else {
          stats.inProgress++;
          stats.oldestLeaseAgeMs = Math.max(stats.oldestLeaseAgeMs ?? 0, now - record.createdAt);
        }
      }
      return stats;
    },
  };
}
