/**
 * Every error idempotency-kit throws, with a stable `code` documented in `docs/reference/errors.md`.
 *
 * Guards check a brand property rather than `instanceof`, so they keep working when two copies of the
 * package are loaded (a common state of `node_modules`).
 * @module
 */
import { describeError } from './describe-error.js';

/** The stable codes of every {@link IdempotencyError}; each one is a heading in `docs/reference/errors.md`. */
export const ErrorCode = {
  InvalidKey: 'invalid_key',
  InvalidOptions: 'invalid_options',
  StoreUnavailable: 'store_unavailable',
  LeaseLost: 'lease_lost',
  ReplayedError: 'replayed_error',
  /** The handler ran but the codec could not encode its result; stored as the key's outcome. */
  OutcomeNotEncodable: 'outcome_not_encodable',
  /**
   * A store applied a write but fewer replicas than it was asked for confirmed it (the Redis store's
   * `waitForReplicas`); the engine reports it through `onReplicationShort` and never throws it.
   */
  ReplicationShort: 'replication_short',
  /** HTTP: a route that requires an `Idempotency-Key` got a request without one (400). */
  MissingKey: 'missing_key',
  /** HTTP: the key was already used for a different request (422). */
  KeyMismatch: 'key_mismatch',
  /** HTTP: the first request with this key is still running (409 + `Retry-After`). */
  InProgress: 'in_progress',
  /** HTTP: the first response with this key exceeded `maxBodyBytes` and was not kept (409). */
  ResponseTooLarge: 'response_too_large',
  /** HTTP: the first response with this key was sent around the capture and could not be kept (409). */
  ResponseNotCaptured: 'response_not_captured',
} as const;

/** One of the {@link ErrorCode} values. */
export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];

/** Where each code is explained; HTTP problem `type` URIs point here too. */
export const ERRORS_DOC_URL =
  'https://github.com/idempotency-kit/idempotency-kit/blob/main/docs/reference/errors.md';

/** Base class of every error this package throws. */
export class IdempotencyError extends Error {
  /** Brand checked by {@link isIdempotencyError}; survives duplicate package copies. */
  readonly isIdempotencyError = true;
  /** Stable machine-readable code. */
  readonly code: ErrorCode;

  constructor(code: ErrorCode, message: string, options?: ErrorOptions) {
    super(message, options);
    this.code = code;
    this.name = 'IdempotencyError';
  }

  /** Link to the explanation of this error's code. */
  get docUrl(): string {
    return `${ERRORS_DOC_URL}#${this.code}`;
  }
}

/** The idempotency key is empty, too long or has characters outside printable ASCII. */
export class InvalidKeyError extends IdempotencyError {
  /** Why the key was refused, safe to show to the caller. */
  readonly reason: string;

  constructor(reason: string, options?: ErrorOptions) {
    super(ErrorCode.InvalidKey, `Invalid idempotency key: ${reason}`, options);
    this.name = 'InvalidKeyError';
    this.reason = reason;
  }
}

/** An option passed to a factory is out of range or malformed. */
export class InvalidOptionsError extends IdempotencyError {
  constructor(message: string, options?: ErrorOptions) {
    super(ErrorCode.InvalidOptions, message, options);
    this.name = 'InvalidOptionsError';
  }
}

/**
 * The store could not be reached or failed. Nothing was executed (fail closed); retry after `retryAfterMs`.
 */
export class StoreUnavailableError extends IdempotencyError {
  /** Suggested wait before retrying. */
  readonly retryAfterMs: number;

  constructor(message: string, options?: ErrorOptions & { retryAfterMs?: number }) {
    super(ErrorCode.StoreUnavailable, message, options);
    this.name = 'StoreUnavailableError';
    this.retryAfterMs = options?.retryAfterMs ?? 1000;
  }
}

/**
 * This worker's claim expired and was taken over (or removed): its completion was refused by the fencing
 * token, so the newer attempt's record is intact.
 */
export class LeaseLostError extends IdempotencyError {
  /** The fencing token this worker held. */
  readonly token: number;

  constructor(token: number, message?: string, options?: ErrorOptions) {
    super(
      ErrorCode.LeaseLost,
      message ?? `Lease lost: claim with token ${token} was taken over or removed`,
      options,
    );
    this.name = 'LeaseLostError';
    this.token = token;
  }
}

/** The shape of an error saved as a final outcome, as it is replayed. */
export interface StoredErrorInfo {
  /** The original error's `name`. */
  name: string;
  /** The original error's `message`. */
  message: string;
  /** The original error's `code`, when it had a string one. */
  code?: string;
}

/**
 * A replay of an error that an earlier execution stored as final (`storeErrors` policy). The original
 * error's name, message and code are kept in `original`.
 */
export class ReplayedError extends IdempotencyError {
  /** What the original error looked like. */
  readonly original: StoredErrorInfo;

  constructor(original: StoredErrorInfo) {
    super(ErrorCode.ReplayedError, `Replayed stored error: ${original.name}: ${original.message}`);
    this.name = 'ReplayedError';
    this.original = original;
  }
}

/**
 * The handler ran, but the codec could not encode its result for storage (with the default JSON codec: a
 * `BigInt`, a circular object…). Its effect has happened, so it must not run again: this error is stored
 * as the key's final outcome, and every retry within the retention gets it back as a {@link ReplayedError}
 * (`original.code` is `outcome_not_encodable`) instead of a second execution. `cause` is the codec's error.
 */
export class OutcomeEncodingError extends IdempotencyError {
  constructor(cause: unknown) {
    // Total, like the description stored with it: a codec may throw anything (a null-prototype object).
    const { name, message } = describeError(cause);
    const reason = `${name}: ${message}`;
    super(
      ErrorCode.OutcomeNotEncodable,
      `The handler ran, but its result could not be encoded for storage (${reason}); ` +
        'this error is kept as the outcome of the key, so the handler does not run again for it',
      { cause },
    );
    this.name = 'OutcomeEncodingError';
  }
}

/**
 * A store **applied** a write, but fewer replicas than it was asked to wait for confirmed it in time (the
 * Redis store's `waitForReplicas`): a completion, a release or a step's result, written after the handler
 * ran, which the store neither fails (that could not undo the handler's effect, and the client would retry
 * a request that succeeded) nor answers as if it were safe (after a failover to a replica that never got
 * it, a retry finds no record and runs the handler again). Not a failure: {@link result} is the write's
 * answer. The engine takes it as that answer and reports the shortfall through the `onReplicationShort`
 * hook; it never throws this error. A direct caller of the store gets it as the rejection of the write.
 */
export class ReplicationShortError extends IdempotencyError {
  /** The store operation whose write is unconfirmed: `complete`, `release` or `saveStep`. */
  readonly operation: string;
  /** What the operation answered (it was applied): `true` for a completion, a release or a step saved. */
  readonly result: boolean;
  /** Replicas that confirmed the write in time; `-1` when the confirmation itself failed (see `cause`). */
  readonly acknowledged: number;
  /** Replicas the store was asked to wait for. */
  readonly required: number;

  constructor(
    details: { operation: string; result: boolean; acknowledged: number; required: number },
    message: string,
    options?: ErrorOptions,
  ) {
    super(ErrorCode.ReplicationShort, message, options);
    this.name = 'ReplicationShortError';
    this.operation = details.operation;
    this.result = details.result;
    this.acknowledged = details.acknowledged;
    this.required = details.required;
  }
}

function hasCode(error: unknown, code: ErrorCode): boolean {
  return isIdempotencyError(error) && error.code === code;
}

/** True for any error thrown by idempotency-kit, from any copy of the package. */
export function isIdempotencyError(error: unknown): error is IdempotencyError {
  return typeof error === 'object' && error !== null && 'isIdempotencyError' in error;
}

/** True for {@link InvalidKeyError}. */
export function isInvalidKeyError(error: unknown): error is InvalidKeyError {
  return hasCode(error, ErrorCode.InvalidKey);
}

/** True for {@link InvalidOptionsError}. */
export function isInvalidOptionsError(error: unknown): error is InvalidOptionsError {
  return hasCode(error, ErrorCode.InvalidOptions);
}

/** True for {@link StoreUnavailableError}. */
export function isStoreUnavailableError(error: unknown): error is StoreUnavailableError {
  return hasCode(error, ErrorCode.StoreUnavailable);
}

/** True for {@link LeaseLostError}. */
export function isLeaseLostError(error: unknown): error is LeaseLostError {
  return hasCode(error, ErrorCode.LeaseLost);
}

/** True for {@link ReplayedError}. */
export function isReplayedError(error: unknown): error is ReplayedError {
  return hasCode(error, ErrorCode.ReplayedError);
}

/** True for {@link OutcomeEncodingError}. */
export function isOutcomeEncodingError(error: unknown): error is OutcomeEncodingError {
  return hasCode(error, ErrorCode.OutcomeNotEncodable);
}

/** True for {@link ReplicationShortError}. */
export function isReplicationShortError(error: unknown): error is ReplicationShortError {
  return hasCode(error, ErrorCode.ReplicationShort);
}
