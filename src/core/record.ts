/**
 * The idempotency record: a discriminated union of its two live states, and the pure transitions every
 * store implements atomically (stores run these rules in Lua or SQL; the memory store calls them directly).
 * @module
 */

/** Record statuses, as `as const` strings (never an `enum`). */
export const RecordStatus = {
  InProgress: 'in_progress',
  Completed: 'completed',
} as const;

/** One of the {@link RecordStatus} values. */
export type RecordStatus = (typeof RecordStatus)[keyof typeof RecordStatus];

/** A claim is held: one worker is executing, until `leaseUntil` (store clock, epoch ms). */
export interface InProgressRecord {
  status: typeof RecordStatus.InProgress;
  /** Fingerprint of the request that claimed the key. */
  fingerprint: string;
  /** Fencing token of the current holder. */
  token: number;
  /**
   * Epoch ms (store clock) at which the lease ends: live while `now < leaseUntil`, dead from `leaseUntil` on
   * (another attempt may take over at that very millisecond), as every built-in store compares.
   */
  leaseUntil: number;
  /** 1 for the first claim, +1 on every takeover. */
  attempt: number;
  /** Epoch ms (store clock) of the first claim. */
  createdAt: number;
  /**
   * Epoch ms (store clock) until which the key stays reserved for this record's fingerprint once its lease
   * has ended (a crashed holder's claim): only an attempt with the same fingerprint may take it over before
   * then. Absent: the lease end. Stores need not report it on the records they return.
   */
  reservedUntil?: number;
  /**
   * Results of the steps finished under this claim (see `RunContext.step`), by step name, as encoded
   * outcome bytes. Kept across takeovers by the same request (same fingerprint), dropped by anything else.
   * Stores need not report it on the records they return.
   */
  steps?: Readonly<Record<string, Uint8Array>>;
}

/** The execution finished and its encoded outcome is kept until `expiresAt` (store clock, epoch ms). */
export interface CompletedRecord {
  status: typeof RecordStatus.Completed;
  /** Fingerprint of the request that produced the outcome. */
  fingerprint: string;
  /** Fencing token of the holder that completed. */
  token: number;
  /** Encoded outcome bytes (see `outcome.ts`), replayed byte-for-byte. */
  outcome: Uint8Array;
  /** Epoch ms (store clock) of completion. */
  completedAt: number;
  /**
   * Epoch ms (store clock) at which the record is gone and the key is new again: replayed while
   * `now < expiresAt`, not from `expiresAt` on.
   */
  expiresAt: number;
}

/** A stored idempotency record. */
export type IdempotencyRecord = InProgressRecord | CompletedRecord;

/**
 * The next fencing token from the key's previous token, when its record survives, and the store clock in
 * microseconds: at least `previous + 1` (a takeover), and at least the clock. The clock is not enough
 * on its own: after a release or an expiry no previous record survives, and a clock that steps back (NTP,
 * a failover to a server whose clock is behind) gives a smaller token than an earlier holder's, which
 * breaks the contract's rule that tokens of a key strictly increase over its whole history. A store must
 * also floor the token with a counter or sequence that outlives the record (`applyClaim`'s `minToken`,
 * which the memory store passes as the last token it issued; a database sequence; a per-key tombstone).
 */
export function nextToken(previousToken: number | undefined, nowMicros: number): number {
  const floor = Math.floor(nowMicros);
  return previousToken === undefined ? floor : Math.max(previousToken + 1, floor);
}

/**
 * True when a record no longer exists from the store's point of view at `now`: it is not live (see
 * {@link isReservedFor} for the one way a dead lease still blocks a claim).
 */
export function isRecordDead(record: IdempotencyRecord, now: number): boolean {
  return record.status === RecordStatus.InProgress
    ? record.leaseUntil <= now
    : record.expiresAt <= now;
}

/**
 * True when a store may forget `record` at `now` (purge, sweep): it is dead and no longer reserved either.
 */
export function isRecordGone(record: IdempotencyRecord, now: number): boolean {
  return record.status === RecordStatus.InProgress
    ? Math.max(record.leaseUntil, record.reservedUntil ?? 0) <= now
    : record.expiresAt <= now;
}

/**
 * True when `record` is an in-progress record whose lease has ended but whose reservation has not, and
 * `fingerprint` is not the one it was claimed with: a claim with that fingerprint is a misuse of the key
 * (a different request under a crashed request's key) and must get the dead record back, not the key.
 */
export function isReservedFor(
  record: IdempotencyRecord | undefined,
  fingerprint: string,
  now: number,
): boolean {
  return (
    record?.status === RecordStatus.InProgress &&
    record.fingerprint !== fingerprint &&
    (record.reservedUntil ?? record.leaseUntil) > now
  );
}

/** Result of a claim attempt: the caller holds the key, or gets the record that blocks it. */
export type ClaimResult =
  | { claimed: true; token: number; attempt: number; leaseUntil: number }
  | { claimed: false; record: IdempotencyRecord };

/**
 * How long beyond its claim a claim reserves its key (see {@link applyClaim}): `reserveMs` when it exceeds
 * `leaseMs`, else 0 (the lease alone). Missing and NaN give 0 too, so a store may pass the result to a
 * backend that compares it as a number.
 */
export function reservationMs(options: { leaseMs: number; reserveMs?: number }): number {
  const { leaseMs, reserveMs } = options;
  return reserveMs !== undefined && reserveMs > leaseMs ? reserveMs : 0;
}

/**
 * The claim transition, as every store must apply it atomically: create if absent or dead; take over an
 * in-progress record whose lease expired (token and attempt grow) if the claim's fingerprint is the
 * record's or the record's reservation has ended too; otherwise leave the record as is and return it.
 * Tokens of one key strictly increase over its whole history, releases and expiries included, when
 * `minToken` is above every token the store issued before (see {@link nextToken}: the clock alone is not).
 *
 * `reserveMs` (from the claim) keeps the new record's key reserved for its fingerprint that long after the
 * claim, should the holder crash: the same request may take it over after the lease, another may not.
 */
export function applyClaim(
  current: IdempotencyRecord | undefined,
  input: {
    fingerprint: string;
    leaseMs: number;
    reserveMs?: number;
    now: number;
    minToken?: number;
  },
): { result: ClaimResult; next: IdempotencyRecord | undefined } {
  const { fingerprint, leaseMs, now } = input;
  if (
    current !== undefined &&
    (!isRecordDead(current, now) || isReservedFor(current, fingerprint, now))
  ) {
    return { result: { claimed: false, record: current }, next: current };
  }
  const takeover = current?.status === RecordStatus.InProgress;
  // `minToken` is the store's own floor (the last token it issued): without it, tokens after a release or
  // an expiry come from the clock alone, which may stand still (a coarse clock) or step back.
  const token = Math.max(nextToken(current?.token, now * 1000), input.minToken ?? 0);
  const next: InProgressRecord = {
    status: RecordStatus.InProgress,
    fingerprint,
    token,
    leaseUntil: now + leaseMs,
    attempt: takeover ? current.attempt + 1 : 1,
    createdAt: takeover ? current.createdAt : now,
  };
  const reserveMs = reservationMs(input);
  if (reserveMs > 0) next.reservedUntil = now + reserveMs;
  // The same request resumes where the crashed attempt got to; another request starts from nothing.
  if (takeover && current.steps !== undefined && current.fingerprint === fingerprint) {
    next.steps = current.steps;
  }
  return {
    result: { claimed: true, token, attempt: next.attempt, leaseUntil: next.leaseUntil },
    next,
  };
}

/**
 * True when `record` is an in-progress record held by `token` whose lease is still live at `now`: the guard
 * of complete, release and extend. An expired lease counts as lost even before anyone takes over, so every
 * store agrees (a Redis lease key is simply gone by then).
 */
export function isHeldBy(
  record: IdempotencyRecord | undefined,
  token: number,
  now: number,
): record is InProgressRecord {
  return (
    record?.status === RecordStatus.InProgress && record.token === token && record.leaseUntil > now
  );
}

/**
 * The complete transition: the in-progress record held by `token` with a live lease becomes completed.
 * Completing again with the same token after success is a no-op that still reports success, so a blind
 * resend after a timeout is safe. Anything else is fenced out (`ok: false`, record unchanged).
 */
export function applyComplete(
  current: IdempotencyRecord | undefined,
  input: { token: number; outcome: Uint8Array; retentionMs: number; now: number },
): { ok: boolean; next: IdempotencyRecord | undefined } {
  const { token, outcome, retentionMs, now } = input;
  if (
    current?.status === RecordStatus.Completed &&
    current.token === token &&
    current.expiresAt > now
  ) {
    return { ok: true, next: current };
  }
  if (!isHeldBy(current, token, now)) return { ok: false, next: current };
  return {
    ok: true,
    next: {
      status: RecordStatus.Completed,
      fingerprint: current.fingerprint,
      token,
      outcome,
      completedAt: now,
      expiresAt: now + retentionMs,
    },
  };
}

/** The release transition: delete the in-progress record held by `token` with a live lease. */
export function applyRelease(
  current: IdempotencyRecord | undefined,
  input: { token: number; now: number },
): { ok: boolean; next: IdempotencyRecord | undefined } {
  return isHeldBy(current, input.token, input.now)
    ? { ok: true, next: undefined }
    : { ok: false, next: current };
}

/** The extend transition: push the lease of the record held by `token` to `now + leaseMs`. */
export function applyExtend(
  current: IdempotencyRecord | undefined,
  input: { token: number; leaseMs: number; now: number },
): { ok: boolean; next: IdempotencyRecord | undefined } {
  if (!isHeldBy(current, input.token, input.now)) return { ok: false, next: current };
  return { ok: true, next: { ...current, leaseUntil: input.now + input.leaseMs } };
}

/**
 * The save-step transition: record `value` as the result of step `name` on the in-progress record held by
 * `token` with a live lease (replacing an earlier result of that name). Anything else is fenced out.
 */
export function applySaveStep(
  current: IdempotencyRecord | undefined,
  input: { token: number; name: string; value: Uint8Array; now: number },
): { ok: boolean; next: IdempotencyRecord | undefined } {
  if (!isHeldBy(current, input.token, input.now)) return { ok: false, next: current };
  return {
    ok: true,
    next: { ...current, steps: { ...current.steps, [input.name]: input.value } },
  };
}

/**
 * The step results of the in-progress record held by `token` with a live lease (an empty object when it
 * has none), or `undefined` when that token does not hold the key.
 */
export function stepsHeldBy(
  current: IdempotencyRecord | undefined,
  token: number,
  now: number,
): Readonly<Record<string, Uint8Array>> | undefined {
  return isHeldBy(current, token, now) ? (current.steps ?? {}) : undefined;
}
